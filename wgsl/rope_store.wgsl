// tandem:include common/step.wgsl
// tandem:include common/rows.wgsl
// tandem:include common/rope.wgsl
// tandem:include common/kv_f16.wgsl
// tandem:twin kv32
//
// Prepares attention inputs for every token of the pass, one head per workgroup, from the QKV
// projection's output (per token: the n_head Q heads, then the K heads, then the V heads):
// Q heads get the optional per-head RMSNorm (Qwen3, Gemma3 q/k norm) and RoPE in place;
// K heads get the same and are written to the K cache at their row's sequence and position
// (common/rows.wgsl); V heads are copied to the V cache (f16, common/kv_f16.wgsl: the head goes through workgroup memory so a thread
// writes four elements at once). RoPE pairs adjacent elements (mode 0, GGML "normal") or halves (mode 1, NeoX),
// rotating the first n_rot elements (common/rope.wgsl). The forward pass runs it for batched
// passes only: a decode step does the same in attention's prologue (attention.wgsl).
// Grid: (n_head + 2 * n_kv_head, n_tokens); 128 threads, each owning elements lid and lid + 128.

struct Params {
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,      // <= 256
    n_rot: u32,         // rotated elements, even, <= head_dim
    ctx: u32,           // cache capacity in positions
    mode: u32,          // 0: normal (adjacent pairs), 1: NeoX (halves)
    theta_base: f32,
    freq_scale: f32,    // 1 / linear scaling factor
    eps: f32,
    flags: u32,         // bit 0: q/k RMSNorm
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read_write> qkv: array<f32>;     // [n_tokens, (n_head + 2 n_kv_head) * head_dim]
@group(0) @binding(1) var<storage, read_write> k_cache: array<KvChunk>; // [n_seq, n_kv_head, ctx, head_dim / 4] (common/kv_f16.wgsl)
@group(0) @binding(2) var<storage, read_write> v_cache: array<KvChunk>; // [n_seq, n_kv_head, ctx, head_dim / 4] (common/kv_f16.wgsl)
@group(0) @binding(3) var<storage, read> q_norm: array<f32>;        // [head_dim] or unused
@group(0) @binding(4) var<storage, read> k_norm: array<f32>;        // [head_dim] or unused
@group(0) @binding(5) var<uniform> p: Params;
@group(0) @binding(6) var<uniform> step: Step;
@group(0) @binding(7) var<storage, read> rows: array<Row>;            // [n_tokens] (common/rows.wgsl)

var<workgroup> hv: array<f32, 256>;
var<workgroup> ho: array<vec4<f32>, 64>;  // the rotated K head, as the cache's vec4 chunks
var<workgroup> red: array<f32, 128>;

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let slot = wg.x;
    let t = wg.y;
    if (t >= step.n_tokens) {
        return;
    }
    let hd = p.head_dim;
    let row = pass_row(t);
    let pos = row.pos;
    // The sequence's first cache row: caches are [n_seq, n_kv_head, ctx].
    let kv_row0 = row.seq * p.n_kv_head;
    // Head `slot` of token t: Q heads, then K heads, then V heads.
    let src = (t * (p.n_head + 2u * p.n_kv_head) + slot) * hd;
    if (slot >= p.n_head + p.n_kv_head) {
        let h = slot - p.n_head - p.n_kv_head;
        let dst = ((kv_row0 + h) * p.ctx + pos) * (hd / 4u);
        for (var c = lid; c < hd / 4u; c += 128u) {
            let i = src + 4u * c;
            v_cache[dst + c] = kv_pack(vec4<f32>(qkv[i], qkv[i + 1u], qkv[i + 2u], qkv[i + 3u]));
        }
        return;
    }
    let is_q = slot < p.n_head;
    let kh = slot - p.n_head;
    var ss = 0.0;
    for (var i = lid; i < hd; i += 128u) {
        let val = qkv[src + i];
        hv[i] = val;
        ss += val * val;
    }
    red[lid] = ss;
    workgroupBarrier();
    if ((p.flags & 1u) != 0u) {
        for (var s = 64u; s > 0u; s >>= 1u) {
            if (lid < s) {
                red[lid] += red[lid + s];
            }
            workgroupBarrier();
        }
        let inv = inverseSqrt(red[0] / f32(hd) + p.eps);
        for (var i = lid; i < hd; i += 128u) {
            var nw: f32;
            if (is_q) {
                nw = q_norm[i];
            } else {
                nw = k_norm[i];
            }
            hv[i] = hv[i] * inv * nw;
        }
        workgroupBarrier();
    }
    let log2_theta = log2(p.theta_base);
    for (var i = lid; i < hd; i += 128u) {
        var out = hv[i];
        if (i < p.n_rot) {
            out = rope_apply(hv[i], hv[rope_partner(i, p.n_rot, p.mode)], i, pos, p.n_rot, p.mode,
                             log2_theta, p.freq_scale);
        }
        if (is_q) {
            qkv[src + i] = out;
        } else {
            ho[i / 4u][i % 4u] = out;
        }
    }
    if (is_q) {
        return;
    }
    workgroupBarrier();
    let dst = ((kv_row0 + kh) * p.ctx + pos) * (hd / 4u);
    for (var c = lid; c < hd / 4u; c += 128u) {
        k_cache[dst + c] = kv_pack(ho[c]);
    }
}
