// tandem:include common/glu_out.wgsl
// The gated rows of matvec_glu.wgsl and moe_gate_up.wgsl: glu_dots, the gate and up dot
// products of one thread's share of RPT rows with x' read through the f32 units
// (common/unit_dot.wgsl or the type's twin). Include-only; the includer has RPT, `p.n_cols` and
// what common/glu_out.wgsl needs.

// Over the thread's units lane, lane + threads, ... of the row: x' at each unit read once
// (common/unit_dot.wgsl's unit_x, at vec4 xo of x) and dotted with the gate rows row0 .. row0 +
// RPT (a row past `last` repeats it) and their up rows, `up` blocks further on.
fn glu_dots(gb0: u32, up: u32, row0: u32, last: u32, xo: u32, lane: u32, threads: u32) -> GluDots {
    let bpr = p.n_cols / QK;
    var d = GluDots(vec4<f32>(0.0), vec4<f32>(0.0));
    for (var u = lane; u < p.n_cols / UNIT; u += threads) {
        let xs = unit_x(u, xo);
        let b = u / (QK / UNIT);
        for (var r = 0u; r < RPT; r++) {
            let gb = gb0 + min(row0 + r, last) * bpr + b;
            d.g[r] += unit_w_dot(gb, u, xs);
            d.v[r] += unit_w_dot(gb + up, u, xs);
        }
    }
    return d;
}
