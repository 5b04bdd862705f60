// tandem:include common/bits.wgsl
// tandem:include common/step.wgsl
// tandem:include common/rms_scale.wgsl
// tandem:include common/reduce.wgsl
// tandem:per-qtype
// tandem:subgroups
//
// h[r] = act(G[r, :] . x') * (U[r, :] . x') for one token: the decode FFN's gate and up
// projections and the gated activation (SwiGLU: SiLU; GeGLU: GELU-tanh) in one dispatch, over
// the stacked weight [G; U] (rows r and n_rows + r). x' is x, or RMSNorm(x) * norm_w with the
// norm prologue (flags bit 2), as in matvec.wgsl.
// Work split: each workgroup takes ROWS output rows; the WG / ROWS threads of a row stride over
// its 8-element units accumulating both dot products, then reduce them with row_sum2
// (common/reduce.wgsl, or its subgroup twin in the `_sg` variants).

override WG: u32 = 256u;
override ROWS: u32 = 4u;  // a power of two; set per adapter by kernels::matvec_rows

struct Params {
    n_rows: u32,    // output rows (the FFN width); the weight has 2 * n_rows
    n_cols: u32,
    act: u32,       // 0: SiLU, 1: GELU (tanh)
    flags: u32,     // bit 2: RMSNorm prologue
    eps: f32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;              // [2 * n_rows, n_cols / QK] blocks
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;        // [n_cols]
@group(0) @binding(2) var<storage, read_write> h: array<f32>;        // [n_rows]
@group(0) @binding(3) var<storage, read> norm_w: array<vec4<f32>>;   // [n_cols] or unused
@group(0) @binding(4) var<uniform> p: Params;

fn gelu_tanh(v: f32) -> f32 {
    let u = clamp(0.7978845608028654 * (v + 0.044715 * v * v * v), -15.0, 15.0);
    return 0.5 * v * (1.0 + tanh(u));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let threads = WG / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row = (wg.x + wg.y * nwg.x) * ROWS + slot;
    // The norm prologue's scale, reduced over the whole workgroup.
    var scale = 1.0;
    let norm = (p.flags & 4u) != 0u;
    if (norm) {
        scale = rms_scale(inv, p.n_cols, p.eps);
    }
    var ag = 0.0;
    var au = 0.0;
    if (row < p.n_rows) {
        let units = p.n_cols / 8u;
        let blocks_per_row = p.n_cols / QK;
        let up_base = p.n_rows * blocks_per_row;
        for (var u = lane; u < units; u += threads) {
            let k = u * 8u;
            var x0 = x[u * 2u];
            var x1 = x[u * 2u + 1u];
            if (norm) {
                x0 = x0 * scale * norm_w[u * 2u];
                x1 = x1 * scale * norm_w[u * 2u + 1u];
            }
            let b = row * blocks_per_row + k / QK;
            let j = (k % QK) / 8u;
            let g = dequant8(b, j);
            let v = dequant8(up_base + b, j);
            ag += dot(g[0], x0) + dot(g[1], x1);
            au += dot(v[0], x0) + dot(v[1], x1);
        }
    }
    let gu = row_sum2(vec2<f32>(ag, au), inv, threads);
    if (lane == 0u && row < p.n_rows) {
        let g = gu.x;
        var a: f32;
        if (p.act == 0u) {
            a = g / (1.0 + exp(-g));
        } else {
            a = gelu_tanh(g);
        }
        h[row] = a * gu.y;
    }
}
