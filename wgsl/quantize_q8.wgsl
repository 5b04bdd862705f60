// tandem:include common/step.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/q8_vec4.wgsl
// tandem:include common/act.wgsl
// tandem:subgroups
//
// x' = x, or RMSNorm(x) * norm_w (flags bit 0), or the gated activation act(gate) * up of x
// holding a row's gate and up side by side (flags bit 1, GELU-tanh for bit 2, else SiLU: glu.wgsl
// without its own dispatch and f32 output), of each row of the pass quantized to int8 blocks
// (common/q8_vec4.wgsl) in common/q8_layout.wgsl's layout, once for every small-batch matrix
// product that reads it (matvec_batch_q8.wgsl). With the norm it quantizes x * norm_w and keeps
// the row's scale s = 1 / sqrt(mean(x^2) + eps) beside it, which the products apply after their
// sums, as the decode kernels' norm prologue does (common/rms_fold.wgsl): a verification computes
// each token's products the way a decode step does. Workgroup (i, r) takes vec4s WG i .. + WG of
// row r, a vec4 a thread; with the norm, its threads first sum the whole row's squares by row_sum
// (common/reduce.wgsl or its `_sg` twin).

const WG: u32 = 256u;  // a multiple of 8 (whole blocks)

struct Params {
    n_cols: u32,    // a multiple of 32
    eps: f32,
    flags: u32,     // bit 0: RMSNorm with norm_w; bit 1: act(gate) * up; bit 2: act is GELU-tanh
    rows_mode: u32, // 0: all tokens, 1: the output rows
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;       // [rows, n_cols] (gate, up: 2 n_cols)
@group(0) @binding(1) var<storage, read> norm_w: array<vec4<f32>>;  // [n_cols] or unused
@group(0) @binding(2) var<storage, read_write> xq: array<u32>;      // [rows, 4 q8_row_len] words
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<uniform> step: Step;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, inv: Invocation) {
    let r = wg.y;
    if (r >= step_rows(step, p.rows_mode)) {
        return;
    }
    let cols4 = p.n_cols / 4u;
    let glu = (p.flags & 2u) != 0u;
    let xi = r * cols4 * select(1u, 2u, glu);
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
    // Vec4 i of the row.
    let i = wg.x * WG + inv.lid;
    var v = vec4<f32>(0.0);
    if (i < cols4) {
        v = x[xi + i];
        if (glu) {
            v = glu_act4(v, (p.flags >> 2u) & 1u) * x[xi + cols4 + i];
        }
        if (norm) {
            v = v * norm_w[i];
        }
    }
    let row = r * q8_row_len(p.n_cols) * 4u;
    q8_store_vec4(v, i, true, inv.lid, row, p.n_cols);
    if (wg.x == 0u && inv.lid < 4u) {
        xq[row + 4u * q8_scale_at(p.n_cols) + inv.lid] = select(0u, bitcast<u32>(scale), inv.lid == 0u);
    }
}
