// tandem:include common/step.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/q8_dot.wgsl
// tandem:include common/act.wgsl
// tandem:subgroups
//
// x' = x, RMSNorm(x) * w (flags bit 0, w in aux), act(gate) * up of a gated FFN's rows [gate | up]
// (flags bit 1, x 2 n_cols wide; act GELU-tanh with bit 2, else SiLU: the glu dispatch folded in
// before the FFN's down product), or attention's output combined from its split parts (flags bit
// 3, the parts in binding 1 where the pass splits, else x: attention_combine.wgsl folded in
// before the output projection), of each row of the pass quantized to int8 blocks
// (common/q8_dot.wgsl) in common/q8_global.wgsl's layout, once for every small-batch matrix
// product that reads it (matvec_batch_q8.wgsl). With the norm it quantizes x * w and keeps
// the row's scale s = 1 / sqrt(mean(x^2) + eps) beside it, which the products apply after their
// sums, as the decode kernels' norm prologue does (common/rms_fold.wgsl): a verification computes
// each token's products the way a decode step does. Workgroup (i, r) takes blocks 64 i .. + 64
// of row r, a block of 32 values a thread; with the norm, its threads first sum the whole row's
// squares by row_sum (common/reduce.wgsl or its `_sg` twin). Each group of four blocks' units
// (d / 254) and of four entries' sums is written as one vec4 by the group's first thread.

const WG: u32 = 64u;

struct Params {
    n_cols: u32,    // a multiple of 32
    eps: f32,
    flags: u32,     // bit 0: RMSNorm with aux; bit 1: GLU (bit 2: GELU-tanh); bit 3: combine
    rows_mode: u32, // 0: all tokens, 1: the output rows
    n_head: u32,    // with combine: attention's heads,
    head_dim: u32,  // of a multiple of 32 values each
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;         // [rows, n_cols or 2 n_cols]
// The norm's weights [n_cols], or attention's parts [rows, n_head, splits, 1 + head_dim / 4]
// (attention.wgsl: each part's running max and sum, then its unnormalised output), or unused.
@group(0) @binding(1) var<storage, read> aux: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> xq: array<vec4<u32>>;  // [rows, q8_row_len]
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<uniform> step: Step;

var<workgroup> units: array<f32, WG>;
var<workgroup> sums: array<f32, 2u * WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, inv: Invocation) {
    let r = wg.y;
    if (r >= step_rows(step, p.rows_mode)) {
        return;
    }
    let cols4 = p.n_cols / 4u;
    let xi = r * cols4;
    let norm = (p.flags & 1u) != 0u;
    var scale = 1.0;
    if (norm) {
        var s = 0.0;
        for (var i = inv.lid; i < cols4; i += WG) {
            let v = x[xi + i];
            s += dot(v, v);
        }
        scale = inverseSqrt(row_sum(s, inv, WG) / f32(p.n_cols) + p.eps);
    }
    let n_blocks = p.n_cols / 32u;
    let sums_at = p.n_cols / 8u + (p.n_cols + 127u) / 128u;
    let scale_at = sums_at + (p.n_cols + 63u) / 64u;
    let row = r * (scale_at + 1u);
    if (wg.x == 0u && inv.lid == 0u) {
        xq[row + scale_at] = bitcast<vec4<u32>>(vec4<f32>(scale, 0.0, 0.0, 0.0));
    }
    let b = wg.x * WG + inv.lid;
    if (b < n_blocks) {
        var v: array<vec4<f32>, 8>;
        let combine = (p.flags & 8u) != 0u && step.attn_splits > 1u;
        if (combine) {
            v = combined_block(r, b, step.attn_splits);
        }
        var amax = vec4<f32>(0.0);
        for (var k = 0u; k < 8u; k++) {
            let i = 8u * b + k;
            if (!combine) {
                v[k] = input4(r, i, cols4);
            }
            if (norm) {
                v[k] = v[k] * aux[i];
            }
            amax = max(amax, abs(v[k]));
        }
        let d = q8_scale(amax);
        let halves = quantize_block(v, d);
        xq[row + 4u * b] = halves[0].q;
        xq[row + 4u * b + 1u] = halves[0].r;
        xq[row + 4u * b + 2u] = halves[1].q;
        xq[row + 4u * b + 3u] = halves[1].r;
        units[inv.lid] = d / 254.0;
        sums[2u * inv.lid] = f32(sum16(halves[0]));
        sums[2u * inv.lid + 1u] = f32(sum16(halves[1]));
    }
    workgroupBarrier();
    if (b < n_blocks && b % 4u == 0u) {
        let j = inv.lid;
        let u = vec4<f32>(units[j], units[j + 1u], units[j + 2u], units[j + 3u]);
        xq[row + p.n_cols / 8u + b / 4u] = bitcast<vec4<u32>>(u);
    }
    if (b < n_blocks && b % 2u == 0u) {
        let j = 2u * inv.lid;
        let s = vec4<f32>(sums[j], sums[j + 1u], sums[j + 2u], sums[j + 3u]);
        xq[row + sums_at + b / 2u] = bitcast<vec4<u32>>(s);
    }
}

// vec4 i of row r of what is quantized: x's, or with GLU act(gate) * up of x's [gate | up] row.
fn input4(r: u32, i: u32, cols4: u32) -> vec4<f32> {
    if ((p.flags & 2u) == 0u) {
        return x[r * cols4 + i];
    }
    let g = x[2u * r * cols4 + i];
    let act = (p.flags >> 2u) & 1u;
    let a = vec4<f32>(glu_act(g.x, act), glu_act(g.y, act), glu_act(g.z, act), glu_act(g.w, act));
    return a * x[(2u * r + 1u) * cols4 + i];
}

// Block b (32 values, within one head) of row r's attention output from the pass's n_split
// parts, as attention_combine.wgsl merges them: out = sum_i w_i o_i / sum_i w_i l_i with
// w_i = e^(m_i - M), M the largest m_i of the non-empty parts (l_i > 0).
fn combined_block(r: u32, b: u32, n_split: u32) -> array<vec4<f32>, 8> {
    let hd4 = p.head_dim / 4u;
    let h = 8u * b / hd4;
    let c4 = 8u * b % hd4;
    let base = (r * p.n_head + h) * n_split * (hd4 + 1u);
    var mx = -3.0e38;
    for (var i = 0u; i < n_split; i++) {
        let e = aux[base + i * (hd4 + 1u)].xy;
        if (e.y > 0.0) {
            mx = max(mx, e.x);
        }
    }
    var v: array<vec4<f32>, 8>;
    var total = 0.0;
    for (var i = 0u; i < n_split; i++) {
        let at = base + i * (hd4 + 1u);
        let e = aux[at].xy;
        let w = select(0.0, exp(e.x - mx), e.y > 0.0);
        total += w * e.y;
        for (var k = 0u; k < 8u; k++) {
            v[k] += w * aux[at + 1u + c4 + k];
        }
    }
    for (var k = 0u; k < 8u; k++) {
        v[k] = v[k] / total;
    }
    return v;
}
