// tandem:include common/bits.wgsl
// tandem:include common/mat_io.wgsl
// tandem:include common/matvec_io.wgsl
// tandem:include common/rms_fold.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/q8_stage.wgsl
// tandem:include common/unit_q8.wgsl
// The row pass of the `_q8` decode matvec (matvec_q8.wgsl has its work split), shared by
// matvec_q8.wgsl and matvec_route_q8.wgsl (the same product with the router's shares in its
// epilogue). Include-only; the includer has WG, ROWS and RPT.

const Q8_TOKENS: u32 = 1u;
const Q8_CHUNK: u32 = 4096u;

// The one token's x (common/q8_stage.wgsl).
fn x_row(t: u32) -> u32 {
    return 0u;
}

// The RPT rows row0 .. of the invocation's group (`lane` of `threads`), dotted with x' and scaled
// by the norm prologue's s, in every invocation of the group. Every invocation calls it, in
// uniform control flow (it stages x' between barriers).
fn decode_rows(row0: u32, lane: u32, threads: u32, inv: Invocation) -> vec4<f32> {
    let bpr = p.n_cols / QK;
    let last = p.n_rows - 1u;
    var acc = vec4<f32>(0.0);
    for (var c0 = 0u; c0 < p.n_cols; c0 += Q8_CHUNK) {
        workgroupBarrier();
        stage_x(1u, c0, inv.lid);
        workgroupBarrier();
        if (row0 < p.n_rows) {
            let u0 = c0 / UNIT;
            for (var u = lane; u < min(Q8_CHUNK, p.n_cols - c0) / UNIT; u += threads) {
                let xs = unit_x(0u, u);
                let b = (u0 + u) / (QK / UNIT);
                for (var r = 0u; r < RPT; r++) {
                    acc[r] += unit_dot_x(unit_w(min(row0 + r, last) * bpr + b, u0 + u), xs);
                }
            }
        }
    }
    let sum = row_sum4(acc, inv, threads);
    return sum * rms_fold_scale(row_sum(x_ss, inv, WG), p.n_cols, p.eps);
}
