// tandem:include common/step.wgsl
//
// out[t, h, :] = softmax(q[t, h] . K[kv(h), s] * scale) . V[kv(h), s] over the positions s the
// query at position pos + t may see: causal (s <= pos + t) and, with a sliding window, within the
// last `window` positions. Grouped-query attention maps head h to KV head h / (n_head / n_kv_head).
// Work split: grid (n_head, n_tokens, n_split). The visible range of each query is cut into
// n_split equal parts ("flash decoding": a decode step has few heads, so the keys are spread over
// workgroups too); each workgroup runs an online softmax over its part in tiles of 128 keys, one
// score per thread, thread i owning output dims i and i + 128. With one split it writes `out`;
// otherwise it writes (max, sum, unnormalised output) to `partial` for attention_combine.wgsl.

struct Params {
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,  // a multiple of 4, <= 256
    ctx: u32,
    scale: f32,
    window: u32,    // 0: no sliding window
    softcap: f32,   // 0: none; else scores become softcap * tanh(score / softcap)
    q_stride: u32,  // floats between tokens in q (the QKV output's width)
}

@group(0) @binding(0) var<storage, read> q: array<f32>;               // [n_tokens, q_stride], Q heads first
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<f32>>;   // [n_kv_head, ctx, head_dim]
@group(0) @binding(2) var<storage, read> v_cache: array<f32>;         // [n_kv_head, ctx, head_dim]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;       // [n_tokens, n_head * head_dim]
@group(0) @binding(4) var<storage, read_write> partial: array<f32>;   // [n_tokens, n_head, n_split, head_dim + 2]
@group(0) @binding(5) var<uniform> p: Params;
@group(0) @binding(6) var<uniform> step: Step;

const TILE: u32 = 128u;
const NEG: f32 = -3.0e38;

var<workgroup> qs: array<vec4<f32>, 64>;
var<workgroup> probs: array<f32, TILE>;
var<workgroup> red: array<f32, TILE>;

fn reduce_max(lid: u32) -> f32 {
    for (var s = TILE / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red[lid] = max(red[lid], red[lid + s]);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

fn reduce_sum(lid: u32) -> f32 {
    for (var s = TILE / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t = wg.y;
    let split = wg.z;
    let n_split = nwg.z;
    if (t >= step.n_tokens) {
        return;
    }
    let hd = p.head_dim;
    let hd4 = hd / 4u;
    let kvh = h / (p.n_head / p.n_kv_head);
    let qpos = step.pos + t;
    let qi = t * p.q_stride + h * hd;
    for (var i = lid; i < hd4; i += TILE) {
        qs[i] = vec4<f32>(q[qi + 4u * i], q[qi + 4u * i + 1u], q[qi + 4u * i + 2u], q[qi + 4u * i + 3u]) * p.scale;
    }
    workgroupBarrier();
    // This query's visible range, and this split's part of it.
    var first = 0u;
    if (p.window > 0u && qpos + 1u > p.window) {
        first = qpos + 1u - p.window;
    }
    let len = qpos + 1u - first;
    let part = (len + n_split - 1u) / n_split;
    let begin = first + min(len, split * part);
    let end = first + min(len, (split + 1u) * part);  // exclusive
    let kv0 = kvh * p.ctx * hd;
    var m = NEG;
    var l = 0.0;
    var acc0 = 0.0;
    var acc1 = 0.0;
    for (var s0 = begin; s0 < end; s0 += TILE) {
        let s = s0 + lid;
        var score = NEG;
        if (s < end) {
            let ko = (kv0 + s * hd) / 4u;
            var d = 0.0;
            for (var i = 0u; i < hd4; i++) {
                d += dot(qs[i], k_cache[ko + i]);
            }
            if (p.softcap > 0.0) {
                d = p.softcap * tanh(d / p.softcap);
            }
            score = d;
        }
        red[lid] = score;
        workgroupBarrier();
        let new_m = max(m, reduce_max(lid));
        var e = 0.0;
        if (s < end) {
            e = exp(score - new_m);
        }
        probs[lid] = e;
        red[lid] = e;
        workgroupBarrier();
        let tile_sum = reduce_sum(lid);
        let alpha = exp(m - new_m);
        l = l * alpha + tile_sum;
        acc0 *= alpha;
        acc1 *= alpha;
        let n = min(TILE, end - s0);
        for (var j = 0u; j < n; j++) {
            let vo = kv0 + (s0 + j) * hd;
            let pj = probs[j];
            if (lid < hd) {
                acc0 += pj * v_cache[vo + lid];
            }
            if (lid + TILE < hd) {
                acc1 += pj * v_cache[vo + lid + TILE];
            }
        }
        m = new_m;
        workgroupBarrier();
    }
    if (n_split == 1u) {
        let o = (t * p.n_head + h) * hd;
        if (lid < hd) {
            out[o + lid] = acc0 / l;
        }
        if (lid + TILE < hd) {
            out[o + lid + TILE] = acc1 / l;
        }
        return;
    }
    let po = ((t * p.n_head + h) * n_split + split) * (hd + 2u);
    if (lid == 0u) {
        partial[po] = m;
        partial[po + 1u] = l;
    }
    if (lid < hd) {
        partial[po + 2u + lid] = acc0;
    }
    if (lid + TILE < hd) {
        partial[po + 2u + lid + TILE] = acc1;
    }
}
