// tandem:include common/step.wgsl
//
// out[t, h, :] = softmax(q[t, h] . K[kv(h), s] * scale) . V[kv(h), s] over the positions s the
// query at position pos + t may see: causal (s <= pos + t) and, with a sliding window, within the
// last `window` positions. Grouped-query attention maps head h to KV head h / (n_head / n_kv_head).
// Work split: one workgroup per (head, token); the 128 threads take 128 keys per tile (one score
// each), then fold the tile into an online softmax; thread i owns output dims i and i + 128.

struct Params {
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,  // <= 256
    ctx: u32,
    scale: f32,
    window: u32,    // 0: no sliding window
    softcap: f32,   // 0: none; else scores become softcap * tanh(score / softcap)
    q_stride: u32,  // floats between tokens in q (the QKV output's width)
}

@group(0) @binding(0) var<storage, read> q: array<f32>;           // [n_tokens, q_stride], Q heads first
@group(0) @binding(1) var<storage, read> k_cache: array<f32>;     // [n_kv_head, ctx, head_dim]
@group(0) @binding(2) var<storage, read> v_cache: array<f32>;     // [n_kv_head, ctx, head_dim]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;   // [n_tokens, n_head * head_dim]
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<uniform> step: Step;

const TILE: u32 = 128u;
const NEG: f32 = -3.0e38;

var<workgroup> qs: array<f32, 256>;
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
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t = wg.y;
    if (t >= step.n_tokens) {
        return;
    }
    let hd = p.head_dim;
    let kvh = h / (p.n_head / p.n_kv_head);
    let qpos = step.pos + t;
    let qi = t * p.q_stride + h * hd;
    let qo = (t * p.n_head + h) * hd;
    for (var i = lid; i < hd; i += TILE) {
        qs[i] = q[qi + i] * p.scale;
    }
    workgroupBarrier();
    var start = 0u;
    if (p.window > 0u && qpos + 1u > p.window) {
        start = qpos + 1u - p.window;
    }
    let kv0 = kvh * p.ctx * hd;
    var m = NEG;
    var l = 0.0;
    var acc0 = 0.0;
    var acc1 = 0.0;
    for (var s0 = start; s0 <= qpos; s0 += TILE) {
        let s = s0 + lid;
        var score = NEG;
        if (s <= qpos) {
            let ko = kv0 + s * hd;
            var d = 0.0;
            for (var i = 0u; i < hd; i++) {
                d += qs[i] * k_cache[ko + i];
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
        if (s <= qpos) {
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
        let n = min(TILE, qpos + 1u - s0);
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
    if (lid < hd) {
        out[qo + lid] = acc0 / l;
    }
    if (lid + TILE < hd) {
        out[qo + lid + TILE] = acc1 / l;
    }
}
