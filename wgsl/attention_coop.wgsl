// tandem:include common/step.wgsl
// tandem:include common/attn_params.wgsl
// tandem:coop
//
// Prefill attention on the adapter's matrix units: out[t, h, :] = softmax(cap(q[t, h] . K * scale))
// . V over the keys query t may see (causal, optionally within a sliding window), as
// attention.wgsl computes it, for passes over one sequence (`step.seq`'s cache, no row table)
// long enough that every query is its own work (no split). Native only, where `GpuFeatures::coop` holds; with the f16 cache, heads a multiple of
// 16 and a cache of whole 64-key tiles (`kernels::attention` checks).
//
// Work split: grid (n_head, n_tokens / 16); one subgroup of 32 threads a workgroup, 16 queries
// of one head (one fragment's rows), flash-attention style over tiles of 64 keys:
// - S = Q K^T: Q staged once as f16 in workgroup memory (fragment A), K read as fragments straight
//   from the f16 cache (B = K^T, column-major with stride HD), 4 accumulator fragments of 16 keys;
// - S through workgroup memory: lanes 2r and 2r + 1 take query r's 32 keys each, apply scale,
//   cap and mask, keep the running max m and sum l (the pair meets with one shuffle) and write P
//   = exp(S - m) as f16 (fragment A of the next product) and the factor exp(m_old - m);
// - O = O * factor + P V: O lives in registers, lane 2r + c holding columns 16 b + 8 c .. + 7 of
//   query r for every 16-column block b (a layout the lanes know, so the rescale is a multiply
//   in registers, as ggml-vulkan's flash attention keeps it); each tile's P V goes, per block,
//   into a zeroed accumulator (P and V's fragments, V read from the cache, row-major), through
//   workgroup memory, where each lane adds its share.
// Keys past the workgroup's last query are read in its last tile but never used: their scores
// are masked by select, and that tile's values go through workgroup memory, 16 keys at a time,
// with zeros past the end (the cache there may hold anything, NaN included, and 0 * NaN is NaN).
// The last tile is its own call after the loop over whole ones, because naga wants every
// cooperative-matrix operation in control flow it can prove uniform. Q and P are rounded to f16,
// as llama.cpp's cooperative-matrix flash attention does.

override HD: u32 = 128u;                // head size: a multiple of 16, at most 256
override LDQ: u32 = HD + 8u;            // f16 stride of a staged query row (16-byte aligned)
override QS: u32 = 16u * LDQ;
override OS: u32 = 16u * HD;           // a tile's P V, block by block
const BK: u32 = 64u;                    // keys a tile
const LDP: u32 = BK + 8u;               // f16 stride of a row of P
const LDS: u32 = BK + 4u;               // f32 stride of a row of S (rows start 4 banks apart)
const NEG: f32 = -3.0e38;

@group(0) @binding(0) var<storage, read> q: array<f32>;                // [n_tokens, q_stride]: Q heads first
@group(0) @binding(1) var<storage, read_write> k_cache: array<f16>;   // [n_seq, n_kv_head, ctx, HD]
@group(0) @binding(2) var<storage, read_write> v_cache: array<f16>;   // [n_seq, n_kv_head, ctx, HD]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;       // [n_tokens, n_head, HD]
@group(0) @binding(7) var<uniform> p: Params;
@group(0) @binding(8) var<uniform> step: Step;

var<workgroup> qs: array<f16, QS>;      // [16][LDQ] the queries; the last tile's masked values
var<workgroup> pv: array<f32, OS>;      // [HD / 16][16][16] a tile's P V
var<workgroup> ss: array<f32, 1088>;    // [16][LDS] a tile's scores
var<workgroup> ps: array<f16, 1152>;    // [16][LDP] a tile's probabilities

@compute @workgroup_size(32)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let h = wg.x;
    let t0 = wg.y * 16u;
    let n_tok = step.n_tokens;
    let kv0 = (step.seq * p.n_kv_head + h / (p.n_head / p.n_kv_head)) * p.ctx * HD;
    for (var i = lane; i < 16u * HD; i += 32u) {
        let r = i / HD;
        let d = i % HD;
        let t = t0 + r;
        qs[r * LDQ + d] = f16(select(0.0, q[min(t, n_tok - 1u) * p.q_stride + h * HD + d], t < n_tok));
    }
    // The workgroup's keys: from its first query's window (whole tiles) to its last query.
    var begin = 0u;
    if (p.window > 0u && step.pos + t0 + 1u > p.window) {
        begin = (step.pos + t0 + 1u - p.window) / BK * BK;
    }
    let end = step.pos + min(t0 + 16u, n_tok);  // exclusive
    let row = Row(lane / 2u, lane % 2u, t0 + lane / 2u < n_tok, step.pos + t0 + lane / 2u);
    var m = NEG;
    var l = 0.0;
    var o: array<vec4<f32>, 32>;  // [HD / 16][2]: this lane's 8 columns of each block
    workgroupBarrier();

    let n_whole = (end - begin) / BK;
    for (var i = 0u; i < n_whole; i++) {
        let k0 = begin + i * BK;
        scores(kv0 + k0 * HD);
        let alpha = probabilities(row, k0, end, &m, &l);
        values_from_cache(kv0 + k0 * HD);
        add_values(row, alpha, &o);
    }
    let k_last = begin + n_whole * BK;
    if (k_last < end) {
        scores(kv0 + k_last * HD);
        let alpha = probabilities(row, k_last, end, &m, &l);
        values_staged(lane, kv0 + k_last * HD, k_last, end);
        add_values(row, alpha, &o);
    }

    let t = t0 + row.r;
    if (row.ok) {
        for (var b = 0u; b < HD / 16u; b++) {
            let at = (t * p.n_head + h) * HD + b * 16u + row.half * 8u;
            for (var j = 0u; j < 2u; j++) {
                let v = o[b * 2u + j] / l;
                for (var e = 0u; e < 4u; e++) {
                    out[at + j * 4u + e] = v[e];
                }
            }
        }
    }
}

// A lane's query row: r (0..15), which half of a tile's keys it scores, whether the row is a
// token of the pass, and its position.
struct Row {
    r: u32,
    half: u32,
    ok: bool,
    pos: u32,
}

// S = Q K^T for the 64 keys from cache index kb, into ss.
fn scores(kb: u32) {
    var s0 = coop_mat16x16<f32, C>();
    var s1 = coop_mat16x16<f32, C>();
    var s2 = coop_mat16x16<f32, C>();
    var s3 = coop_mat16x16<f32, C>();
    for (var d0 = 0u; d0 < HD; d0 += 16u) {
        // naga's SPIR-V wants each pointer's index a value of its own.
        let iq = d0;
        let i0 = kb + d0;
        let i1 = i0 + 16u * HD;
        let i2 = i1 + 16u * HD;
        let i3 = i2 + 16u * HD;
        let a = coopLoadT<coop_mat16x16<f16, A>>(&qs[iq], LDQ);
        s0 = coopMultiplyAdd(a, coopLoad<coop_mat16x16<f16, B>>(&k_cache[i0], HD), s0);
        s1 = coopMultiplyAdd(a, coopLoad<coop_mat16x16<f16, B>>(&k_cache[i1], HD), s1);
        s2 = coopMultiplyAdd(a, coopLoad<coop_mat16x16<f16, B>>(&k_cache[i2], HD), s2);
        s3 = coopMultiplyAdd(a, coopLoad<coop_mat16x16<f16, B>>(&k_cache[i3], HD), s3);
    }
    let o1 = 16u;
    let o2 = 32u;
    let o3 = 48u;
    coopStoreT(s0, &ss[0], LDS);
    coopStoreT(s1, &ss[o1], LDS);
    coopStoreT(s2, &ss[o2], LDS);
    coopStoreT(s3, &ss[o3], LDS);
    workgroupBarrier();
}

// The tile's probabilities P = exp(S - m) into ps and the running max m and sum l of the lane's
// row (the lane pair meets with one shuffle); returns the row's factor exp(m_old - m). Each lane
// walks its 32 keys from its own offset (2r + half), so that with rows LDS apart the 32 lanes'
// reads of ss fall in 32 different banks.
fn probabilities(row: Row, k0: u32, end: u32, m: ptr<function, f32>, l: ptr<function, f32>) -> f32 {
    var first = 0u;
    if (p.window > 0u && row.pos + 1u > p.window) {
        first = row.pos + 1u - p.window;
    }
    let rot = 2u * row.r + row.half;
    var tile_max = NEG;
    for (var j = 0u; j < 32u; j++) {
        let kk = row.half * 32u + (j + rot) % 32u;
        let key = k0 + kk;
        var sc = ss[row.r * LDS + kk] * p.scale;
        if (p.softcap > 0.0) {
            sc = p.softcap * tanh(sc / p.softcap);
        }
        sc = select(NEG, sc, row.ok && key >= first && key <= row.pos && key < end);
        ss[row.r * LDS + kk] = sc;
        tile_max = max(tile_max, sc);
    }
    let new_m = max(*m, max(tile_max, subgroupShuffleXor(tile_max, 1u)));
    var sum = 0.0;
    for (var j = 0u; j < 32u; j++) {
        let kk = row.half * 32u + (j + rot) % 32u;
        let sc = ss[row.r * LDS + kk];
        let pk = select(0.0, exp(sc - new_m), sc > NEG);
        ps[row.r * LDP + kk] = f16(pk);
        sum += pk;
    }
    let alpha = exp(*m - new_m);
    *l = *l * alpha + sum + subgroupShuffleXor(sum, 1u);
    *m = new_m;
    workgroupBarrier();
    return alpha;
}

// O = O * alpha + the tile's P V (in pv), the lane's columns of its row.
fn add_values(row: Row, alpha: f32, o: ptr<function, array<vec4<f32>, 32>>) {
    for (var b = 0u; b < HD / 16u; b++) {
        let at = b * 256u + row.r * 16u + row.half * 8u;
        for (var j = 0u; j < 2u; j++) {
            let v = vec4<f32>(pv[at + j * 4u], pv[at + j * 4u + 1u], pv[at + j * 4u + 2u], pv[at + j * 4u + 3u]);
            (*o)[b * 2u + j] = (*o)[b * 2u + j] * alpha + v;
        }
    }
}

// The P V of a tile of 64 keys of the pass from cache index kb into pv, block by block, V's
// fragments read from the cache.
fn values_from_cache(kb: u32) {
    let p1 = 16u;
    let p2 = 32u;
    let p3 = 48u;
    let a0 = coopLoadT<coop_mat16x16<f16, A>>(&ps[0], LDP);
    let a1 = coopLoadT<coop_mat16x16<f16, A>>(&ps[p1], LDP);
    let a2 = coopLoadT<coop_mat16x16<f16, A>>(&ps[p2], LDP);
    let a3 = coopLoadT<coop_mat16x16<f16, A>>(&ps[p3], LDP);
    for (var d0 = 0u; d0 < HD; d0 += 16u) {
        let io = d0 * 16u;
        let i0 = kb + d0;
        let i1 = i0 + 16u * HD;
        let i2 = i1 + 16u * HD;
        let i3 = i2 + 16u * HD;
        var o = coop_mat16x16<f32, C>();
        o = coopMultiplyAdd(a0, coopLoadT<coop_mat16x16<f16, B>>(&v_cache[i0], HD), o);
        o = coopMultiplyAdd(a1, coopLoadT<coop_mat16x16<f16, B>>(&v_cache[i1], HD), o);
        o = coopMultiplyAdd(a2, coopLoadT<coop_mat16x16<f16, B>>(&v_cache[i2], HD), o);
        o = coopMultiplyAdd(a3, coopLoadT<coop_mat16x16<f16, B>>(&v_cache[i3], HD), o);
        coopStoreT(o, &pv[io], 16u);
    }
    workgroupBarrier();
}

// The P V of the last tile, keys k0 .. from cache index kb, into pv: each 16 keys' values
// staged in qs (the queries are done with) with zeros from key `end` on.
fn values_staged(lane: u32, kb: u32, k0: u32, end: u32) {
    for (var i = lane; i < 16u * HD; i += 32u) {
        pv[i] = 0.0;
    }
    for (var j = 0u; j < 4u; j++) {
        for (var i = lane; i < 16u * HD; i += 32u) {
            let key = k0 + j * 16u + i / HD;
            qs[(i / HD) * LDQ + i % HD] = select(f16(0.0), v_cache[kb + j * 16u * HD + i], key < end);
        }
        workgroupBarrier();
        let ip = j * 16u;
        let a = coopLoadT<coop_mat16x16<f16, A>>(&ps[ip], LDP);
        for (var d0 = 0u; d0 < HD; d0 += 16u) {
            let io = d0 * 16u;
            let iq = d0;
            var o = coopLoadT<coop_mat16x16<f32, C>>(&pv[io], 16u);
            o = coopMultiplyAdd(a, coopLoadT<coop_mat16x16<f16, B>>(&qs[iq], LDQ), o);
            coopStoreT(o, &pv[io], 16u);
        }
        workgroupBarrier();
    }
}
