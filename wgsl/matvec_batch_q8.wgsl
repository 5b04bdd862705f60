// tandem:include common/bits.wgsl
// tandem:include common/mat_io.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/q8_global.wgsl
// tandem:include common/unit_q8.wgsl
// tandem:qtypes q4_k q6_k q8_0
// tandem:subgroups
//
// Y[t, y_offset + r] (+)= sum_k W[r, k] * x'[t, k] (+ bias[y_offset + r]) for a small batch of
// tokens (speculative verification, the batched serve step, short prompt chunks), with x' the
// pass's x quantized once by quantize_q8.wgsl (common/q8_global.wgsl): the decode matvec_q8's
// split and arithmetic (the same int8 x', exact integer dot products, the norm's scale applied
// after the sums; only the float sums' order differs), with every weight unit loaded once for TOKENS tokens (grid z: the pass's groups
// of them; a pipeline per TOKENS, so the accumulators and loops are only as many as it takes). Each workgroup takes ROWS rows in groups of RPT; a group's WG * RPT / ROWS threads
// stride over the units, load the unit's weights of the group's RPT rows, then dot them with
// each token's x' read straight from global memory (no staging, so no barrier between the
// loads), then reduce each token's RPT sums by row_sum4 (common/reduce.wgsl or its `_sg` twin).
// A group past the last row repeats the last row and writes nothing.

override WG: u32 = 256u;
override ROWS: u32 = 4u;  // a power of two; the matrix's shape (kernels::MatvecShape::for_small)
override RPT: u32 = 1u;   // rows per thread group: 1, 2 or 4, dividing ROWS

override TOKENS: u32 = 8u;  // tokens a workgroup: 2, 4 or 8 (kernels::mat::SMALL_TOKENS)

const MAX_TOKENS: u32 = 8u;

@group(0) @binding(7) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    // n_tok from wg.z, not the private x_row0: it bounds the reductions' loop, which must be
    // uniform (Tint's analysis treats every private variable as non-uniform).
    let tok0 = wg.z * TOKENS;
    x_row0 = tok0;
    let n_tok = min(step_rows(step, p.rows_mode) - tok0, TOKENS);
    let threads = WG * RPT / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row0 = (wg.x + wg.y * nwg.x) * ROWS + slot * RPT;
    let bpr = p.n_cols / QK;
    let last = p.n_rows - 1u;
    var acc: array<vec4<f32>, MAX_TOKENS>;
    if (row0 < p.n_rows) {
        for (var u = lane; u < p.n_cols / UNIT; u += threads) {
            let b = u / (QK / UNIT);
            var k: array<UnitW, 4>;
            for (var r = 0u; r < RPT; r++) {
                k[r] = unit_w(min(row0 + r, last) * bpr + b, u);
            }
            for (var t = 0u; t < TOKENS; t++) {
                if (t < n_tok) {
                    let xs = unit_x(t, u);
                    for (var r = 0u; r < RPT; r++) {
                        acc[t][r] += unit_dot_x(k[r], xs);
                    }
                }
            }
        }
    }
    for (var t = 0u; t < TOKENS; t++) {
        if (t >= n_tok) {
            break;
        }
        let sum = row_sum4(acc[t], inv, threads) * x_scale(t);
        for (var i = lane; i < RPT; i += threads) {
            if (row0 + i < p.n_rows) {
                store_out(x_row0 + t, row0 + i, sum[i]);
            }
        }
        workgroupBarrier();
    }
}
