// tandem:include common/step.wgsl
// tandem:include common/rows.wgsl
// tandem:include common/rope.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/kv_f16.wgsl
// tandem:include common/attn_params.wgsl
// tandem:include common/attn_scratch.wgsl
// tandem:include common/attn_parts.wgsl
// tandem:twin last
// tandem:twin kv32
// tandem:subgroups
//
// out[t, h, :] = softmax(cap(q[t, h] . K[seq, kv(h), s] * scale)) . V[seq, kv(h), s] over the
// positions s that row t, at position pos of sequence seq (common/rows.wgsl), may see: causal
// (s <= pos) and, with a sliding window, within the last `window` positions. Grouped-query attention maps head h to KV head h / (n_head /
// n_kv_head); cap(x) = softcap * tanh(x / softcap) when softcap > 0.
//
// Work split: grid (n_head / GQ, n_tokens, n_split), 256 threads. A workgroup serves GQ query
// heads of one KV head (grouped-query attention): each key and value it loads serves all of them,
// so a KV head's cache is read once per GQ heads, not once per head. Each query's visible range is cut
// into n_split parts of whole 64-key tiles ("flash decoding": a decode step has few heads, so the
// keys are spread over workgroups too; a long prefill has enough queries and takes n_split = 1).
// n_split follows the longest row, so in a batched step a shorter row's last parts may be empty:
// they write l = 0, which the merge (common/attn_merge.wgsl) weighs by 0.
// Per tile:
// - scores: 4 threads per key, thread (key, lane) dots the vec4 chunks lane, lane + 4, ... of K[key]
//   with those of each of the GQ queries (in workgroup memory); the partial dots meet in workgroup
//   memory, where a thread of its own sums each (head, key)'s four;
// - output: thread (c, g) owns vec4 chunk c of the GQ outputs for keys g, g + KG, ... of the tile
//   (KG = 256 / (HD / 4) key groups), so HD / 4 adjacent threads read one whole V row.
// Each thread holds its keys' and values' chunks of a tile in registers, loaded a tile ahead (the
// first before the decode prologue), so the loads overlap the prologue and the previous tile's
// softmax. The loops filling them run to the arrays' constant size so a compiler can unroll them
// and keep the arrays in registers (bench/RESULTS.md, "Sixteenth session", has the figures).
// An online softmax per head runs over the tiles (running max m; thread k < 64 keeps the running
// sums of key slot k); 4 barriers per tile. At the end the 64 partial sums meet in one reduction
// and each head's KG partial outputs in workgroup memory; with one split the result goes to `out`,
// otherwise (m, l, unnormalised output) goes to `partial` (common/attn_parts.wgsl) for
// attention_combine.wgsl, or, in the `_last` variants, the workgroup that finishes a head's last
// part merges them itself (common/attn_parts_last.wgsl).
//
// Decode prologue (flags bit 1, passes of one row): the kernel also does rope_store's work, so a
// decode step needs no rope_store dispatch. The GQ queries are read raw from the QKV output and
// get the optional q norm and RoPE in workgroup memory; the workgroup whose part holds the new position
// builds the new key (k norm, RoPE) and value from the QKV output too and uses them for that
// position, rounded to the cache's f16 (common/kv_f16.wgsl) so a step sees what a batched pass
// reading the cache sees, and the one of the heads sharing that KV head writes them to the
// caches. No other workgroup of the dispatch reads that position, so the store needs no ordering. The q/k norm's
// sums of squares go through row_sum4 and row_sum (common/reduce.wgsl; in the `_sg` variant,
// subgroupAdd and one barrier).
// Workgroup memory: 4 + 1 + 1 + 0.125 + 2 + 2 KiB, and the reduction's 1 + 4 KiB: under the 16 KiB
// WebGPU grants by default (GQ * HD <= 512 keeps the queries at 2 KiB).

override HD: u32 = 64u;                      // head size: a multiple of 4, at most 256
override GQ: u32 = 1u;                       // query heads per workgroup: at most 4, GQ * HD <= 512
const TK: u32 = 64u;                         // keys per tile
const LANES: u32 = 4u;                       // threads per key for the scores
override HD4: u32 = HD / 4u;                 // vec4 chunks per head
override KC: u32 = (HD4 + LANES - 1u) / LANES;  // chunks per lane of a key
override KG: u32 = 256u / HD4;               // key groups of the output product
override KPT: u32 = (TK + KG - 1u) / KG;     // keys per thread of the output product
override QE: u32 = (GQ * HD + WG - 1u) / WG; // query elements per thread in the prologue (<= 2)

@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;                 // [n_tokens, q_stride / 4]: Q heads, K heads, V heads
@group(0) @binding(1) var<storage, read_write> k_cache: array<KvChunk>;     // [n_seq, n_kv_head, ctx, HD / 4] (common/kv_f16.wgsl)
@group(0) @binding(2) var<storage, read_write> v_cache: array<KvChunk>;     // [n_seq, n_kv_head, ctx, HD / 4] (common/kv_f16.wgsl)
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;         // [n_tokens, n_head, HD / 4]
// Binding 4, `partial`: common/attn_parts.wgsl.
@group(0) @binding(5) var<storage, read> q_norm: array<f32>;                  // [HD] or unused
@group(0) @binding(6) var<storage, read> k_norm: array<f32>;                  // [HD] or unused
@group(0) @binding(7) var<uniform> p: Params;
@group(0) @binding(8) var<uniform> step: Step;
@group(0) @binding(9) var<storage, read> rows: array<Row>;                    // [n_tokens] (common/rows.wgsl)

const NEG: f32 = -3.0e38;
const WG: u32 = 256u;

// Workgroup memory beside common/attn_scratch.wgsl's `dots`, `scores` and `probs`.
var<workgroup> maxes: array<f32, 32>;           // [GQ, TK / 8] maxima of 8 scores
var<workgroup> qh: array<vec4<f32>, 128>;       // [GQ, HD4] the queries (normed and rotated by the decode prologue)
var<workgroup> kh: array<f32, 256>;
var<workgroup> vh: array<f32, 256>;

// Element e of the queries [GQ, HD].
fn q_at(e: u32) -> f32 {
    return qh[e / 4u][e % 4u];
}

// Decode prologue: the GQ queries (and, with `with_k`, the new key and value) of token 0, at
// position `pos`, from the QKV output, normed and rotated into qh (kh, vh). Every thread calls it.
fn prologue(inv: Invocation, h0: u32, kvh: u32, pos: u32, with_k: bool) {
    let lid = inv.lid;
    var xq: array<f32, 2>;
    var ssq = vec4<f32>(0.0);
    for (var i = 0u; i < QE; i++) {
        let e = lid + i * WG;
        var x = 0.0;
        if (e < GQ * HD) {
            let qi = h0 * HD + e;
            x = q[qi / 4u][qi % 4u];
            ssq[e / HD] += x * x;
        }
        xq[i] = x;
    }
    var xk = 0.0;
    if (with_k && lid < HD) {
        let ki = (p.n_head + kvh) * HD + lid;
        let vi = (p.n_head + p.n_kv_head + kvh) * HD + lid;
        xk = q[ki / 4u][ki % 4u];
        vh[lid] = q[vi / 4u][vi % 4u];
    }
    if ((p.flags & 1u) != 0u) {
        // Each head's sum of squares over the whole workgroup (at most 4 heads, one sum each).
        let sq = row_sum4(ssq, inv, WG);
        let sk = row_sum(xk * xk, inv, WG);
        for (var i = 0u; i < QE; i++) {
            let e = lid + i * WG;
            if (e < GQ * HD) {
                xq[i] *= inverseSqrt(sq[e / HD] / f32(HD) + p.eps) * q_norm[e % HD];
            }
        }
        if (lid < HD) {
            xk *= inverseSqrt(sk / f32(HD) + p.eps) * k_norm[lid];
        }
    }
    for (var i = 0u; i < QE; i++) {
        let e = lid + i * WG;
        if (e < GQ * HD) {
            qh[e / 4u][e % 4u] = xq[i];
        }
    }
    kh[lid] = xk;
    workgroupBarrier();
    let log2_theta = log2(p.theta_base);
    var rq = xq;
    var rk = xk;
    for (var i = 0u; i < QE; i++) {
        let e = lid + i * WG;
        let d = e % HD;
        if (e < GQ * HD && d < p.n_rot) {
            let j = e - d + rope_partner(d, p.n_rot, p.mode);
            rq[i] = rope_apply(xq[i], q_at(j), d, pos, p.n_rot, p.mode, log2_theta, p.freq_scale);
        }
    }
    if (lid < p.n_rot) {
        let j = rope_partner(lid, p.n_rot, p.mode);
        rk = rope_apply(xk, kh[j], lid, pos, p.n_rot, p.mode, log2_theta, p.freq_scale);
    }
    workgroupBarrier();
    for (var i = 0u; i < QE; i++) {
        let e = lid + i * WG;
        if (e < GQ * HD) {
            qh[e / 4u][e % 4u] = rq[i];
        }
    }
    kh[lid] = rk;
    workgroupBarrier();
}

// Chunk i of kh, vh.
fn kh4(i: u32) -> vec4<f32> {
    return vec4<f32>(kh[4u * i], kh[4u * i + 1u], kh[4u * i + 2u], kh[4u * i + 3u]);
}
fn vh4(i: u32) -> vec4<f32> {
    return vec4<f32>(vh[4u * i], vh[4u * i + 1u], vh[4u * i + 2u], vh[4u * i + 3u]);
}

// This thread's chunks of the keys of the tile at s0 (score layout: key sk, lane), zero past end.
fn load_keys(kr: ptr<function, array<KvChunk, 16>>, kv0: u32, s0: u32, end: u32, sk: u32,
             lane: u32) {
    let s = s0 + sk;
    for (var c = 0u; c < 16u; c++) {
        let i = lane + c * LANES;
        var x = KvChunk();
        if (c < KC && i < HD4 && s < end) {
            x = k_cache[kv0 + s * HD4 + i];
        }
        (*kr)[c] = x;
    }
}

// This thread's chunks of the values of the tile at s0 (output layout: chunk oc of keys og,
// og + KG, ...), zero past end.
fn load_values(vr: ptr<function, array<KvChunk, 16>>, kv0: u32, s0: u32, end: u32, oc: u32,
               og: u32) {
    for (var j = 0u; j < 16u; j++) {
        let kj = og + j * KG;
        var x = KvChunk();
        if (j < KPT && og < KG && kj < TK && s0 + kj < end) {
            x = v_cache[kv0 + (s0 + kj) * HD4 + oc];
        }
        (*vr)[j] = x;
    }
}

// The GQ heads' dot products of query chunk i with key chunk kc (lanes past GQ: 0).
fn head_dots(i: u32, kc: vec4<f32>) -> vec4<f32> {
    var r = vec4<f32>(dot(qh[i], kc), 0.0, 0.0, 0.0);
    if (GQ > 1u) {
        r.y = dot(qh[HD4 + i], kc);
    }
    if (GQ > 2u) {
        r.z = dot(qh[2u * HD4 + i], kc);
    }
    if (GQ > 3u) {
        r.w = dot(qh[3u * HD4 + i], kc);
    }
    return r;
}

// Key slot k's score for each head, a head a lane (lanes past GQ: what no head writes).
fn head_scores(k: u32) -> vec4<f32> {
    return vec4<f32>(scores[k], scores[TK + k], scores[2u * TK + k], scores[3u * TK + k]);
}

// Each head's tile max: the maxima of its eight groups of eight scores.
fn head_tile_max() -> vec4<f32> {
    var r = vec4<f32>(NEG);
    for (var j = 0u; j < TK / 8u; j++) {
        let n = TK / 8u;
        r = max(r, vec4<f32>(maxes[j], maxes[n + j], maxes[2u * n + j], maxes[3u * n + j]));
    }
    return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let lid = inv.lid;
    let h0 = wg.x * GQ;
    let t = wg.y;
    let split = wg.z;
    let n_split = nwg.z;
    if (t >= step.n_tokens) {
        return;
    }
    let group = p.n_head / p.n_kv_head;
    let kvh = h0 / group;
    let row = pass_row(t);
    let qpos = row.pos;
    // This KV head's keys: the caches are [n_seq, n_kv_head, ctx, HD4].
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

    // Score layout: key `sk` of the tile, lane `lane`.
    let sk = lid / LANES;
    let lane = lid % LANES;
    // Output layout: chunk `oc`, key group `og` (threads past KG * HD4 only help with scores).
    let oc = lid % HD4;
    let og = lid / HD4;
    // The first tile's keys and values, loaded before the prologue; the new position's chunks,
    // stored by the prologue after this load, are taken from workgroup memory instead.
    var kr: array<KvChunk, 16>;  // KC <= 16
    var vr: array<KvChunk, 16>;  // KPT <= 16
    load_keys(&kr, kv0, begin, end, sk, lane);
    load_values(&vr, kv0, begin, end, oc, og);
    // With the decode prologue, the new position's key and value come from workgroup memory.
    let fused = (p.flags & 2u) != 0u && step.n_tokens == 1u;
    let has_new = fused && begin <= qpos && qpos < end;
    if (fused) {
        prologue(inv, h0, kvh, qpos, has_new);
        if (has_new && h0 % group == 0u && lid < HD4) {
            let o = kv0 + qpos * HD4 + lid;
            k_cache[o] = kv_pack(kh4(lid));
            v_cache[o] = kv_pack(vh4(lid));
        }
    } else {
        for (var i = 0u; i < QE; i++) {
            let e = lid + i * WG;
            if (e < GQ * HD) {
                let qi = t * p.q_stride + h0 * HD + e;
                qh[e / 4u][e % 4u] = q[qi / 4u][qi % 4u];
            }
        }
    }
    workgroupBarrier();

    // Each head's running max and (thread k < TK: key slot k's share of) running sum, one lane of
    // a vec4 a head, and its output chunk in acc0 .. acc3: no private array indexed by a head
    // (bench/vk-stats: the driver kept such arrays, for GQ = 4, in local memory).
    var m = vec4<f32>(NEG);
    var l = vec4<f32>(0.0);
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    for (var s0 = begin; s0 < end; s0 += TK) {
        // Partial scores of key s for every head, its chunks read straight into the sums.
        let s = s0 + sk;
        // Zeroed explicitly: Chromium's WebGPU does not zero a variable declared in a loop body
        // again on each iteration (the WGSL spec says it must).
        var d = vec4<f32>(0.0);
        for (var c = 0u; c < KC; c++) {
            let i = lane + c * LANES;
            if (i < HD4 && s < end) {
                var kc = kv_unpack(kr[c]);
                if (has_new && s == qpos) {
                    kc = kv_unpack(kv_pack(kh4(i)));
                }
                d += head_dots(i, kc);
            }
        }
        // The next tile's keys, loading while this one's softmax runs.
        let s1 = s0 + TK;
        if (s1 < end) {
            load_keys(&kr, kv0, s1, end, sk, lane);
        }
        let dv = d;
        for (var g = 0u; g < GQ; g++) {
            dots[g * TK + sk][lane] = dv[g];
        }
        workgroupBarrier();
        // Thread lid < GQ TK: the score of (head lid / TK, key lid % TK), a thread a pair (64
        // threads taking a key's GQ scores each were 1.8% slower at 4k, bench/RESULTS.md,
        // forty-fifth session).
        // Then each head's tile max in two levels (8 threads take 8 scores each, then every
        // thread reads the 8 maxima).
        if (lid < GQ * TK) {
            var sc = NEG;
            if (s0 + lid % TK < end) {
                let dd = dots[lid];
                sc = (dd.x + dd.y + dd.z + dd.w) * p.scale;
                if (p.softcap > 0.0) {
                    sc = p.softcap * tanh(sc / p.softcap);
                }
            }
            scores[lid] = sc;
        }
        workgroupBarrier();
        if (lid < GQ * (TK / 8u)) {
            var m8 = NEG;
            for (var j = 0u; j < 8u; j++) {
                m8 = max(m8, scores[lid * 8u + j]);
            }
            maxes[lid] = m8;
        }
        workgroupBarrier();
        // Lanes past GQ read workgroup memory no head writes (zero): finite, and never used.
        let new_m = max(m, head_tile_max());
        let alpha = exp(m - new_m);
        m = new_m;
        if (lid < TK) {
            let sc = head_scores(lid);
            let pk = select(vec4<f32>(0.0), exp(sc - m), s0 + lid < end);
            for (var g = 0u; g < GQ; g++) {
                probs[g * TK + lid] = pk[g];
            }
            l = l * alpha + pk;
        }
        workgroupBarrier();
        acc0 *= alpha.x;
        acc1 *= alpha.y;
        acc2 *= alpha.z;
        acc3 *= alpha.w;
        for (var j = 0u; j < KPT; j++) {
            let kj = og + j * KG;
            if (og < KG && kj < TK && s0 + kj < end) {
                var vc = kv_unpack(vr[j]);
                if (has_new && s0 + kj == qpos) {
                    vc = kv_unpack(kv_pack(vh4(oc)));
                }
                acc0 += probs[kj] * vc;
                if (GQ > 1u) {
                    acc1 += probs[TK + kj] * vc;
                }
                if (GQ > 2u) {
                    acc2 += probs[2u * TK + kj] * vc;
                }
                if (GQ > 3u) {
                    acc3 += probs[3u * TK + kj] * vc;
                }
            }
        }
        if (s1 < end) {
            load_values(&vr, kv0, s1, end, oc, og);
        }
        // No barrier here: dots and scores were last read before the barriers above, and the
        // next tile writes probs only after two more barriers every thread passes.
    }
    // The heads' running sums: key slot k's shares, held by thread k < TK.
    let live = (vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(GQ)) & vec4<bool>(lid < TK);
    let lsum = row_sum4(select(vec4<f32>(0.0), l, live), inv, WG);
    let at = Out(lid, h0, t, split, n_split);
    finish_head(at, 0u, acc0, m.x, lsum.x);
    if (GQ > 1u) {
        finish_head(at, 1u, acc1, m.y, lsum.y);
    }
    if (GQ > 2u) {
        finish_head(at, 2u, acc2, m.z, lsum.z);
    }
    if (GQ > 3u) {
        finish_head(at, 3u, acc3, m.w, lsum.w);
    }
}

// Where a workgroup's results go: its thread, first head, token and split.
struct Out {
    lid: u32,
    h0: u32,
    t: u32,
    split: u32,
    n_split: u32,
}

// Head h0 + g's output, unnormalised, for threads lid < HD4: the KG partial outputs `acc` of the
// threads meet in workgroup memory. Every thread calls it, in uniform control flow.
fn head_output(at: Out, acc: vec4<f32>) -> vec4<f32> {
    workgroupBarrier();
    dots[at.lid] = acc;
    workgroupBarrier();
    var o = vec4<f32>(0.0);
    if (at.lid < HD4) {
        for (var kg = 0u; kg < KG; kg++) {
            o += dots[kg * HD4 + at.lid];
        }
    }
    return o;
}
