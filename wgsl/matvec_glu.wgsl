// tandem:include common/bits.wgsl
// tandem:include common/step.wgsl
// tandem:include common/rms_fold.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/act.wgsl
// tandem:include common/unit_dot.wgsl
// tandem:per-qtype
// tandem:subgroups
//
// h[r] = act(G[r, :] . x') * (U[r, :] . x') for one token: the decode FFN's gate and up
// projections and the gated activation (SwiGLU: SiLU; GeGLU: GELU-tanh) in one dispatch, over
// the stacked weight [G; U] (rows r and n_rows + r). x' is x, or RMSNorm(x) * norm_w with the
// norm prologue (flags bit 2) folded into the row pass (common/rms_fold.wgsl).
// Work split: each workgroup takes ROWS output rows; the WG / ROWS threads of a row stride over
// its units accumulating both dot products (unit_dot2: common/unit_dot.wgsl or the type's twin),
// then reduce them and the prologue's sum of x^2 with row_sum4 (common/reduce.wgsl, or its
// subgroup twin in the `_sg` variants).

override WG: u32 = 256u;
override ROWS: u32 = 4u;  // a power of two; set per adapter by kernels::matvec_rows

struct Params {
    n_rows: u32,    // output rows (the FFN width); the weight has 2 * n_rows
    n_cols: u32,
    act: u32,       // 0: SiLU, 1: GELU (tanh)
    flags: u32,     // bit 2: RMSNorm prologue
    eps: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;              // [2 * n_rows, n_cols / QK] blocks
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;        // [n_cols]
@group(0) @binding(2) var<storage, read_write> h: array<f32>;        // [n_rows]
@group(0) @binding(3) var<storage, read> norm_w: array<vec4<f32>>;   // [n_cols] or unused
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let threads = WG / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row = (wg.x + wg.y * nwg.x) * ROWS + slot;
    var gu = vec2<f32>(0.0);
    if (row < p.n_rows) {
        let gb = row * (p.n_cols / QK);
        let ub = gb + p.n_rows * (p.n_cols / QK);
        for (var u = lane; u < p.n_cols / UNIT; u += threads) {
            gu += unit_dot2(gb, ub, u, 0u);
        }
    }
    let sum = row_sum4(vec4<f32>(gu, x_ss, 0.0), inv, threads);
    gu = sum.xy * rms_fold_scale(sum.z, p.n_cols, p.eps);
    if (lane == 0u && row < p.n_rows) {
        h[row] = glu_act(gu.x, p.act) * gu.y;
    }
}
