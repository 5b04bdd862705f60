// The decode gate/up dot products (matvec_glu.wgsl, moe_gate_up.wgsl): this thread's partial sums
// (G . x', U . x') over the 8-element units u = lane, lane + threads, .. of one row pair, where
// the gate row's blocks start at block gb of `w` and the up row's up_off blocks later, and
// x' = x * scale * norm_w with the norm prologue (norm), else x. Include-only; the includer
// declares `x` and `norm_w` (array<vec4<f32>>, n_cols floats) and gets QK, `w` and dequant8 from
// its common/quant_*.wgsl.

fn glu_dots(gb: u32, up_off: u32, n_cols: u32, lane: u32, threads: u32, norm: bool,
            scale: f32) -> vec2<f32> {
    var ag = 0.0;
    var au = 0.0;
    for (var u = lane; u < n_cols / 8u; u += threads) {
        let k = u * 8u;
        var x0 = x[u * 2u];
        var x1 = x[u * 2u + 1u];
        if (norm) {
            x0 = x0 * scale * norm_w[u * 2u];
            x1 = x1 * scale * norm_w[u * 2u + 1u];
        }
        let b = gb + k / QK;
        let j = (k % QK) / 8u;
        let g = dequant8(b, j);
        let v = dequant8(b + up_off, j);
        ag += dot(g[0], x0) + dot(g[1], x1);
        au += dot(v[0], x0) + dot(v[1], x1);
    }
    return vec2<f32>(ag, au);
}
