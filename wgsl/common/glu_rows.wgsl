// The gated rows of matvec_glu.wgsl and moe_gate_up.wgsl: glu_dots, the gate and up dot
// products of one thread's share of RPT rows, and glu_outputs, the rows' act(G x') * (U x') from
// them. Include-only; the includer has RPT, `p.n_cols`, `p.act`, `p.eps` and includes
// common/rms_fold.wgsl, common/reduce.wgsl (or its twin) and common/act.wgsl first.

struct GluDots {
    g: vec4<f32>,
    v: vec4<f32>,
}

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

// The group's RPT outputs act(G x') * (U x') from its threads' dot products d: the gate and up
// sums over the group's `threads` invocations, times the norm prologue's factor
// (common/rms_fold.wgsl; 1 without it). Every invocation calls it, in uniform control flow.
fn glu_outputs(d: GluDots, inv: Invocation, threads: u32) -> vec4<f32> {
    let gs = row_sum4(d.g, inv, threads);
    workgroupBarrier();
    let vs = row_sum4(d.v, inv, threads);
    let s = rms_fold_scale(row_sum(x_ss, inv, threads), p.n_cols, p.eps);
    var out = vec4<f32>(0.0);
    for (var r = 0u; r < RPT; r++) {
        out[r] = glu_act(gs[r] * s, p.act) * vs[r] * s;
    }
    return out;
}
