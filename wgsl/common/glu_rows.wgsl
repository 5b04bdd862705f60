// The gate and up dot products of one thread's share of RPT rows (matvec_glu.wgsl,
// moe_gate_up.wgsl): over its units lane, lane + threads, ... of the row, x' at each unit read
// once (common/unit_dot.wgsl's unit_x, at vec4 xo of x) and dotted with the gate rows
// row0 .. row0 + RPT (a row past `last` repeats it) and their up rows, `up` blocks further on.
// Include-only; the includer has RPT and `p.n_cols`.

struct GluDots {
    g: vec4<f32>,
    v: vec4<f32>,
}

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
