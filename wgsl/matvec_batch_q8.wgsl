// tandem:include common/bits.wgsl
// tandem:include common/mat_io.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/q8_global.wgsl
// tandem:include common/unit_q8.wgsl
// tandem:qtypes q4_k q6_k q8_0
// tandem:with narrow
// tandem:subgroups
//
// Y[t, y_offset + r] (+)= sum_k W[r, k] * x'[t, k] (+ bias[y_offset + r]) for a small batch of
// tokens (speculative verification, the batched serve step, short prompt chunks), with x' the
// pass's x quantized once by quantize_q8.wgsl (common/q8_global.wgsl): the decode matvec_q8's
// split and arithmetic (the same int8 x', exact integer dot products, the norm's scale applied
// after the sums; only the float sums' order differs), with every weight unit loaded once for
// TOKENS tokens (grid z: the pass's groups of them; a pipeline per TOKENS). Each workgroup takes
// ROWS rows in groups of RPT; a group's WG * RPT / ROWS threads stride over the units, load the
// unit's weights of the group's RPT rows, then dot them with each token's x' read straight from
// global memory (no staging, so no barrier between the loads), then reduce each token's RPT sums
// by row_sum4 (common/reduce.wgsl or its `_sg` twin). A group past the last row repeats the last
// row and writes nothing; a group of fewer than TOKENS tokens repeats its last token.
//
// The rows' units and the tokens' sums are named variables indexed only by constants (no loop
// over RPT or TOKENS indexes an array): a private array indexed in a loop the driver does not
// unroll lives in local memory (NVIDIA: 256 bytes a thread for Q4_K, 384 for Q6_K, read and
// written per unit; bench/vk-stats), and TOKENS and RPT are constants there, so the branches on
// them fold away. Q6_K takes its `narrow` unit of 32 weights (common/unit_q8_q6_k_narrow.wgsl,
// `tandem:with narrow`): with the 64-weight unit this kernel kept 172 to 255 registers (the 2-,
// 4- and 8-token pipelines), with it 106 to 128, and a 4-token pass of the dense 8B shape took
// 7,770 us where it took 8,510 (H100, bench/RESULTS.md, forty-sixth session).

override WG: u32 = 256u;
override ROWS: u32 = 4u;  // a power of two; the matrix's shape (kernels::MatvecShape::for_small)
override RPT: u32 = 1u;   // rows per thread group: 1, 2 or 4, dividing ROWS

override TOKENS: u32 = 8u;  // tokens a workgroup: 2, 4 or 8 (kernels::mat::SMALL_TOKENS)

@group(0) @binding(7) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs

// The group's RPT rows' dot products at unit u with token t's x' (rows past RPT: 0).
fn dots(k: array<UnitW, 4>, t: u32, u: u32) -> vec4<f32> {
    let xs = unit_x(t, u);
    var s = vec4<f32>(unit_dot_x(k[0], xs), 0.0, 0.0, 0.0);
    if (RPT > 1u) {
        s.y = unit_dot_x(k[1], xs);
    }
    if (RPT > 2u) {
        s.z = unit_dot_x(k[2], xs);
        s.w = unit_dot_x(k[3], xs);
    }
    return s;
}

// Sums token t's dot products over the group's threads and stores them (t < n_tok). Uniform
// control flow; the barrier lets the next token's sum reuse the portable reduction's memory.
fn finish(acc: vec4<f32>, t: u32, n_tok: u32, row0: u32, lane: u32, inv: Invocation,
          threads: u32) {
    let sum = row_sum4(acc, inv, threads) * x_scale(min(t, n_tok - 1u));
    if (t < n_tok) {
        for (var i = lane; i < RPT; i += threads) {
            if (row0 + i < p.n_rows) {
                store_out(x_row0 + t, row0 + i, sum[i]);
            }
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    // n_tok from wg.z, not the private x_row0: it bounds the reductions, which must be in
    // uniform control flow (Tint's analysis treats every private variable as non-uniform).
    let tok0 = wg.z * TOKENS;
    x_row0 = tok0;
    let n_tok = min(step_rows(step, p.rows_mode) - tok0, TOKENS);
    let t_last = n_tok - 1u;
    let threads = WG * RPT / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row0 = (wg.x + wg.y * nwg.x) * ROWS + slot * RPT;
    let bpr = p.n_cols / QK;
    let last = p.n_rows - 1u;
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    var a4 = vec4<f32>(0.0);
    var a5 = vec4<f32>(0.0);
    var a6 = vec4<f32>(0.0);
    var a7 = vec4<f32>(0.0);
    if (row0 < p.n_rows) {
        for (var u = lane; u < p.n_cols / UNIT; u += threads) {
            let b = u / (QK / UNIT);
            var k: array<UnitW, 4>;
            k[0] = unit_w(row0 * bpr + b, u);
            if (RPT > 1u) {
                k[1] = unit_w(min(row0 + 1u, last) * bpr + b, u);
            }
            if (RPT > 2u) {
                k[2] = unit_w(min(row0 + 2u, last) * bpr + b, u);
                k[3] = unit_w(min(row0 + 3u, last) * bpr + b, u);
            }
            a0 += dots(k, 0u, u);
            a1 += dots(k, min(1u, t_last), u);
            if (TOKENS > 2u) {
                a2 += dots(k, min(2u, t_last), u);
                a3 += dots(k, min(3u, t_last), u);
            }
            if (TOKENS > 4u) {
                a4 += dots(k, min(4u, t_last), u);
                a5 += dots(k, min(5u, t_last), u);
                a6 += dots(k, min(6u, t_last), u);
                a7 += dots(k, min(7u, t_last), u);
            }
        }
    }
    finish(a0, 0u, n_tok, row0, lane, inv, threads);
    finish(a1, 1u, n_tok, row0, lane, inv, threads);
    if (TOKENS > 2u) {
        finish(a2, 2u, n_tok, row0, lane, inv, threads);
        finish(a3, 3u, n_tok, row0, lane, inv, threads);
    }
    if (TOKENS > 4u) {
        finish(a4, 4u, n_tok, row0, lane, inv, threads);
        finish(a5, 5u, n_tok, row0, lane, inv, threads);
        finish(a6, 6u, n_tok, row0, lane, inv, threads);
        finish(a7, 7u, n_tok, row0, lane, inv, threads);
    }
}
