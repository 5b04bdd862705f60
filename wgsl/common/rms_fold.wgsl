// The RMSNorm prologue of the decode matvecs (matvec, matvec_glu, moe_gate_up; flags bit 2),
// folded into the row pass. RMSNorm(x) * norm_w . W[r] = s * ((x * norm_w) . W[r]) with one
// scalar s = 1 / sqrt(mean(x^2) + eps) for the token, so a row's threads dot W[r] with
// x * norm_w and sum x^2 from the same reads; the row's reduction carries that sum along, and s is
// applied after it (rms_fold_scale). The weight loads wait for no pass over x and no reduction
// of their own.
// It relies on the unit functions (common/unit_dot.wgsl and its twins) reading each element of x
// once per row. Include-only; the includer has `x` and `norm_w` (array<vec4<f32>>) and `p.flags`.

// This thread's sum of x^2 over the elements its xv calls read.
var<private> x_ss: f32;
// Where the token's row starts in x (vec4s), for an includer that reads the row of one of several
// tokens (moe_gate_up.wgsl): norm_w is one row.
var<private> rms_row: u32;

// x' (common/unit_dot.wgsl): x, or x * norm_w with the prologue.
fn xv(i: u32) -> vec4<f32> {
    let v = x[i];
    if ((p.flags & 4u) == 0u) {
        return v;
    }
    x_ss += dot(v, v);
    return v * norm_w[i - rms_row];
}

// s from a row's reduced sum of x^2 (1 without the prologue).
fn rms_fold_scale(ss: f32, n_cols: u32, eps: f32) -> f32 {
    if ((p.flags & 4u) == 0u) {
        return 1.0;
    }
    return inverseSqrt(ss / f32(n_cols) + eps);
}
