// tandem:include common/step.wgsl
// tandem:include common/rows.wgsl
// tandem:include common/rope.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/kv_f16.wgsl
// tandem:include common/attn_params.wgsl
// tandem:kv32
// tandem:subgroups
//
// out[t, h, :] = softmax(cap(q[t, h] . K[seq, kv(h), s] * scale)) . V[seq, kv(h), s] over the
// positions s that row t, at position pos of sequence seq (common/rows.wgsl), may see: causal
// (s <= pos) and, with a sliding window, within the last `window` positions. Grouped-query attention maps head h to KV head h / (n_head /
// n_kv_head); cap(x) = softcap * tanh(x / softcap) when softcap > 0.
//
// Work split: grid (n_head, n_tokens, n_split), 256 threads. Each query's visible range is cut
// into n_split parts of whole 64-key tiles ("flash decoding": a decode step has few heads, so the
// keys are spread over workgroups too; a long prefill has enough queries and takes n_split = 1).
// n_split follows the longest row, so in a batched step a shorter row's last parts may be empty:
// they write l = 0, which attention_combine.wgsl weighs by 0.
// Per tile:
// - scores: 4 threads per key, thread (key, lane) dots the vec4 chunks lane, lane + 4, ... of q
//   (in workgroup memory) and of K[key]; the 4 partial dots meet in workgroup memory;
// - output: thread (c, g) owns vec4 chunk c of the output for keys g, g + KG, ... of the tile
//   (KG = 256 / (HD / 4) key groups), so HD / 4 adjacent threads read one whole V row.
// Keys and values go from memory straight into the sums; no thread holds a tile in an array
// (bench/RESULTS.md, "Kernel notes moved from the WGSL headers", says why).
// An online softmax runs over the tiles (running max m; thread k < 64 keeps the running sum of key
// slot k); 4 barriers per tile, and besides its q chunks no thread reads more than 8 + KPT values
// of workgroup memory per tile. At the end the KG partial outputs and the 64
// partial sums are added in workgroup memory; with one split the result goes to `out`, otherwise
// (m, l, unnormalised output) goes to `partial` for attention_combine.wgsl.
//
// Decode prologue (flags bit 1, passes of one row): the kernel also does rope_store's work, so a
// decode step needs no rope_store dispatch. q is read raw from the QKV output and gets the
// optional q norm and RoPE in workgroup memory; the workgroup whose part holds the new position
// builds the new key (k norm, RoPE) and value from the QKV output too and uses them for that
// position, rounded to the cache's f16 (common/kv_f16.wgsl) so a step sees what a batched pass
// reading the cache sees, and the one of the heads sharing that KV head writes them to the
// caches. No other workgroup of the dispatch reads that position, so the store needs no ordering. The q/k norm's
// two sums of squares go through row_sum4 (common/reduce.wgsl; in the `_sg` variant, subgroupAdd
// and one barrier).
// Workgroup memory: 1 + 0.25 + 0.25 + 4 + 3 KiB, and the reduction's 1 + 4 KiB.

override HD: u32 = 64u;                      // head size: a multiple of 4, at most 256
const TK: u32 = 64u;                         // keys per tile
const LANES: u32 = 4u;                       // threads per key for the scores
override HD4: u32 = HD / 4u;                 // vec4 chunks per head
override KC: u32 = (HD4 + LANES - 1u) / LANES;  // chunks per lane of a key
override KG: u32 = 256u / HD4;               // key groups of the output product
override KPT: u32 = (TK + KG - 1u) / KG;     // keys per thread of the output product

@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;                 // [n_tokens, q_stride / 4]: Q heads, K heads, V heads
@group(0) @binding(1) var<storage, read_write> k_cache: array<KvChunk>;     // [n_seq, n_kv_head, ctx, HD / 4] (common/kv_f16.wgsl)
@group(0) @binding(2) var<storage, read_write> v_cache: array<KvChunk>;     // [n_seq, n_kv_head, ctx, HD / 4] (common/kv_f16.wgsl)
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;         // [n_tokens, n_head, HD / 4]
@group(0) @binding(4) var<storage, read_write> partial: array<vec4<f32>>;     // [n_tokens, n_head, n_split, 1 + HD / 4]: (m, l, 0, 0), output
@group(0) @binding(5) var<storage, read> q_norm: array<f32>;                  // [HD] or unused
@group(0) @binding(6) var<storage, read> k_norm: array<f32>;                  // [HD] or unused
@group(0) @binding(7) var<uniform> p: Params;
@group(0) @binding(8) var<uniform> step: Step;
@group(0) @binding(9) var<storage, read> rows: array<Row>;                    // [n_tokens] (common/rows.wgsl)

const NEG: f32 = -3.0e38;
const WG: u32 = 256u;

var<workgroup> dots: array<f32, 256>;           // [TK, LANES] partial dot products
var<workgroup> scores: array<f32, TK>;
var<workgroup> probs: array<f32, TK>;
var<workgroup> maxes: array<f32, 8>;      // [TK / 8] maxima of 8 scores
var<workgroup> outs: array<vec4<f32>, 256>;     // [KG, HD4] partial outputs
var<workgroup> qh: array<f32, 256>;             // the query (normed and rotated by the decode prologue)
var<workgroup> kh: array<f32, 256>;
var<workgroup> vh: array<f32, 256>;

// Decode prologue: q (and, with `with_k`, the new key and value) of token 0, at position `pos`,
// from the QKV output, normed and rotated into qh (kh, vh). Every thread calls it.
fn prologue(inv: Invocation, h: u32, kvh: u32, pos: u32, with_k: bool) {
    let lid = inv.lid;
    var xq = 0.0;
    var xk = 0.0;
    if (lid < HD) {
        let qi = h * HD + lid;
        xq = q[qi / 4u][qi % 4u];
        if (with_k) {
            let ki = (p.n_head + kvh) * HD + lid;
            let vi = (p.n_head + p.n_kv_head + kvh) * HD + lid;
            xk = q[ki / 4u][ki % 4u];
            vh[lid] = q[vi / 4u][vi % 4u];
        }
    }
    if ((p.flags & 1u) != 0u) {
        // The sums of squares of both heads over the whole workgroup.
        let ss = row_sum4(vec4<f32>(xq * xq, xk * xk, 0.0, 0.0), inv, WG).xy;
        let scale = inverseSqrt(ss / f32(HD) + p.eps);
        if (lid < HD) {
            xq *= scale.x * q_norm[lid];
            xk *= scale.y * k_norm[lid];
        }
    }
    qh[lid] = xq;
    kh[lid] = xk;
    workgroupBarrier();
    let log2_theta = log2(p.theta_base);
    var rq = xq;
    var rk = xk;
    if (lid < p.n_rot) {
        let j = rope_partner(lid, p.n_rot, p.mode);
        rq = rope_apply(xq, qh[j], lid, pos, p.n_rot, p.mode, log2_theta, p.freq_scale);
        rk = rope_apply(xk, kh[j], lid, pos, p.n_rot, p.mode, log2_theta, p.freq_scale);
    }
    workgroupBarrier();
    qh[lid] = rq;
    kh[lid] = rk;
    workgroupBarrier();
}

// Chunk i of qh, kh, vh.
fn qh4(i: u32) -> vec4<f32> {
    return vec4<f32>(qh[4u * i], qh[4u * i + 1u], qh[4u * i + 2u], qh[4u * i + 3u]);
}
fn kh4(i: u32) -> vec4<f32> {
    return vec4<f32>(kh[4u * i], kh[4u * i + 1u], kh[4u * i + 2u], kh[4u * i + 3u]);
}
fn vh4(i: u32) -> vec4<f32> {
    return vec4<f32>(vh[4u * i], vh[4u * i + 1u], vh[4u * i + 2u], vh[4u * i + 3u]);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let lid = inv.lid;
    let h = wg.x;
    let t = wg.y;
    let split = wg.z;
    let n_split = nwg.z;
    if (t >= step.n_tokens) {
        return;
    }
    let kvh = h / (p.n_head / p.n_kv_head);
    let row = pass_row(t);
    let qpos = row.pos;
    // This head's keys: the caches are [n_seq, n_kv_head, ctx, HD4].
    let kv0 = (row.seq * p.n_kv_head + kvh) * p.ctx * HD4;
    // This query's visible range, and this split's whole tiles of it.
    var first = 0u;
    if (p.window > 0u && qpos + 1u > p.window) {
        first = qpos + 1u - p.window;
    }
    let len = qpos + 1u - first;
    let part = ((len + n_split - 1u) / n_split + TK - 1u) / TK * TK;
    let begin = first + min(len, split * part);
    let end = first + min(len, split * part + part);  // exclusive

    // Score layout: key `sk` of the tile, lane `lane`; q chunks of this lane in registers.
    let sk = lid / LANES;
    let lane = lid % LANES;
    // With the decode prologue, the new position's key and value come from workgroup memory.
    let fused = (p.flags & 2u) != 0u && step.n_tokens == 1u;
    let has_new = fused && begin <= qpos && qpos < end;
    if (fused) {
        prologue(inv, h, kvh, qpos, has_new);
        if (has_new && h % (p.n_head / p.n_kv_head) == 0u && lid < HD4) {
            let o = kv0 + qpos * HD4 + lid;
            k_cache[o] = kv_pack(kh4(lid));
            v_cache[o] = kv_pack(vh4(lid));
        }
    }
    // This query in qh (the prologue put it there already).
    if (!fused && lid < HD) {
        let qi = t * p.q_stride + h * HD + lid;
        qh[lid] = q[qi / 4u][qi % 4u];
    }
    workgroupBarrier();
    // Output layout: chunk `oc`, key group `og` (threads past KG * HD4 only help with scores).
    let oc = lid % HD4;
    let og = lid / HD4;

    var m = NEG;
    var l = 0.0;
    var acc = vec4<f32>(0.0);
    for (var s0 = begin; s0 < end; s0 += TK) {
        // Score of key s (lanes' partial dots), its chunks read straight into the sum.
        let s = s0 + sk;
        var d = 0.0;
        for (var c = 0u; c < KC; c++) {
            let i = lane + c * LANES;
            if (i < HD4 && s < end) {
                var kc = kv_unpack(k_cache[kv0 + s * HD4 + i]);
                if (has_new && s == qpos) {
                    kc = kv_unpack(kv_pack(kh4(i)));
                }
                d += dot(qh4(i), kc);
            }
        }
        dots[lid] = d;
        workgroupBarrier();
        // Thread k < TK: score of key k. The tile's max in two levels (8 threads take 8 scores
        // each, then every thread reads the 8 maxima), so no thread walks the whole tile.
        var sc = NEG;
        if (lid < TK) {
            if (s0 + lid < end) {
                let b = lid * LANES;
                sc = (dots[b] + dots[b + 1u] + dots[b + 2u] + dots[b + 3u]) * p.scale;
                if (p.softcap > 0.0) {
                    sc = p.softcap * tanh(sc / p.softcap);
                }
            }
            scores[lid] = sc;
        }
        workgroupBarrier();
        if (lid < TK / 8u) {
            var m8 = NEG;
            for (var j = 0u; j < 8u; j++) {
                m8 = max(m8, scores[lid * 8u + j]);
            }
            maxes[lid] = m8;
        }
        workgroupBarrier();
        var tile_max = NEG;
        for (var j = 0u; j < TK / 8u; j++) {
            tile_max = max(tile_max, maxes[j]);
        }
        let new_m = max(m, tile_max);
        let alpha = exp(m - new_m);
        if (lid < TK) {
            let pk = select(0.0, exp(sc - new_m), s0 + lid < end);
            probs[lid] = pk;
            // Thread k keeps key slot k's share of the running sum; they meet once, at the end.
            l = l * alpha + pk;
        }
        workgroupBarrier();
        acc *= alpha;
        for (var j = 0u; j < KPT; j++) {
            let kj = og + j * KG;
            if (og < KG && kj < TK && s0 + kj < end) {
                var vc = kv_unpack(v_cache[kv0 + (s0 + kj) * HD4 + oc]);
                if (has_new && s0 + kj == qpos) {
                    vc = kv_unpack(kv_pack(vh4(oc)));
                }
                acc += probs[kj] * vc;
            }
        }
        m = new_m;
        // No barrier here: dots and scores were last read before the barriers above, and the
        // next tile writes probs only after two more barriers every thread passes.
    }
    outs[lid] = acc;
    if (lid < TK) {
        scores[lid] = l;
    }
    workgroupBarrier();
    if (lid >= HD4) {
        return;
    }
    l = 0.0;
    for (var k = 0u; k < TK; k++) {
        l += scores[k];
    }
    var o = vec4<f32>(0.0);
    for (var g = 0u; g < KG; g++) {
        o += outs[g * HD4 + lid];
    }
    if (n_split == 1u) {
        out[(t * p.n_head + h) * HD4 + lid] = o / l;
        return;
    }
    let po = ((t * p.n_head + h) * n_split + split) * (HD4 + 1u);
    if (lid == 0u) {
        partial[po] = vec4<f32>(m, l, 0.0, 0.0);
    }
    partial[po + 1u + lid] = o;
}
