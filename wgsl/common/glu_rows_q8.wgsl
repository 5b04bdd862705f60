// tandem:include common/glu_out.wgsl
// The gated rows of the `_q8` kernels (matvec_glu_q8.wgsl, moe_gate_up_q8.wgsl): glu_dots_q8, the
// gate and up dot products of one thread's share of RPT rows with x' staged as int8 by the whole
// workgroup (common/q8_stage.wgsl), a chunk of Q8_CHUNK columns at a time, and dotted by
// dot4I8Packed (common/unit_q8.wgsl's twin for the type). Include-only; the includer has WG, RPT,
// `p.n_cols`, what common/q8_stage.wgsl and common/glu_out.wgsl need, and calls glu_outputs with
// `ss_threads` = WG (the staging threads summed x^2).

// Over the thread's units lane, lane + threads, ... of each chunk: x' at each unit read once and
// dotted with the gate rows row0 .. row0 + RPT (a row past `last` repeats it) from block gb0 on,
// and their up rows, `up` blocks further on. Every invocation calls it, in uniform control flow
// (it stages x' between barriers); only those with `loads` load weights.
fn glu_dots_q8(loads: bool, gb0: u32, up: u32, row0: u32, last: u32, lane: u32, threads: u32,
               lid: u32) -> GluDots {
    let bpr = p.n_cols / QK;
    var d = GluDots(vec4<f32>(0.0), vec4<f32>(0.0));
    for (var c0 = 0u; c0 < p.n_cols; c0 += Q8_CHUNK) {
        workgroupBarrier();
        stage_x(1u, c0, lid);
        workgroupBarrier();
        if (loads) {
            let u0 = c0 / UNIT;
            for (var u = lane; u < min(Q8_CHUNK, p.n_cols - c0) / UNIT; u += threads) {
                let xs = unit_x(0u, u);
                let b = (u0 + u) / (QK / UNIT);
                for (var r = 0u; r < RPT; r++) {
                    let gb = gb0 + min(row0 + r, last) * bpr + b;
                    d.g[r] += unit_dot_x(unit_w(gb, u0 + u), xs);
                    d.v[r] += unit_dot_x(unit_w(gb + up, u0 + u), xs);
                }
            }
        }
    }
    return d;
}
