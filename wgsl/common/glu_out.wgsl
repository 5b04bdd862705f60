// The gated rows' outputs (matvec_glu.wgsl, moe_gate_up.wgsl and their `_q8` twins): GluDots, one
// thread's gate and up dot products of its RPT rows (common/glu_rows.wgsl, glu_rows_q8.wgsl), and
// glu_outputs, the rows' act(G x') * (U x') from them. Include-only; the includer has RPT,
// `p.n_cols`, `p.act`, `p.eps` and includes common/rms_fold.wgsl, common/reduce.wgsl (or its twin)
// and common/act.wgsl first.

struct GluDots {
    g: vec4<f32>,
    v: vec4<f32>,
}

// The group's RPT outputs act(G x') * (U x') from its threads' dot products d: the gate and up
// sums over the group's `threads` invocations, times the norm prologue's factor
// (common/rms_fold.wgsl; 1 without it) from the sums of x^2 of `ss_threads` invocations (the
// group's, or the whole workgroup's where it staged x' together). Every invocation calls it, in
// uniform control flow.
fn glu_outputs(d: GluDots, inv: Invocation, threads: u32, ss_threads: u32) -> vec4<f32> {
    let gs = row_sum4(d.g, inv, threads);
    workgroupBarrier();
    let vs = row_sum4(d.v, inv, threads);
    let s = rms_fold_scale(row_sum(x_ss, inv, ss_threads), p.n_cols, p.eps);
    var out = vec4<f32>(0.0);
    for (var r = 0u; r < RPT; r++) {
        out[r] = glu_act(gs[r] * s, p.act) * vs[r] * s;
    }
    return out;
}
