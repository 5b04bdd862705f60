// tandem:include common/bits.wgsl
// tandem:include common/mat_io.wgsl
// tandem:include common/matvec_io.wgsl
// tandem:include common/rms_fold.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/unit_dot.wgsl
// The row pass of the decode matvec (matvec.wgsl has its work split), shared by matvec.wgsl and
// matvec_route.wgsl (the same product with the router's shares in its epilogue). Include-only;
// the includer has WG, ROWS and RPT.

// The RPT rows row0 .. of the invocation's group (`lane` of `threads`), dotted with x' and scaled
// by the norm prologue's s, in every invocation of the group. Every invocation calls it, in
// uniform control flow.
fn decode_rows(row0: u32, lane: u32, threads: u32, inv: Invocation) -> vec4<f32> {
    let bpr = p.n_cols / QK;
    var acc = vec4<f32>(0.0);
    if (row0 < p.n_rows) {
        let last = p.n_rows - 1u;
        for (var u = lane; u < p.n_cols / UNIT; u += threads) {
            let xs = unit_x(u, 0u);
            let b = u / (QK / UNIT);
            for (var r = 0u; r < RPT; r++) {
                acc[r] += unit_w_dot(min(row0 + r, last) * bpr + b, u, xs);
            }
        }
    }
    // The dot products and, with the prologue, the sum of x^2 (common/rms_fold.wgsl).
    let sum = row_sum4(acc, inv, threads);
    let ss = row_sum(x_ss, inv, threads);
    return sum * rms_fold_scale(ss, p.n_cols, p.eps);
}
