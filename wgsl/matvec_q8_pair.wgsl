// tandem:include common/matvec_q8_dots.wgsl
// tandem:pairs q4_k:q6_k
// tandem:with narrow
// tandem:subgroups
//
// matvec_q8.wgsl (read it first) over a matrix stored in two chunks of different weight types,
// in one dispatch: a Q4_K_M file keeps Q and K in Q4_K and V in Q6_K in half its layers, and
// the attention projections' decode step took a dispatch for each chunk, the second waiting for
// the first (wgpu orders every dispatch that writes y after the ones before it). The first
// p_b.n_rows / ROWS workgroups take the second chunk (w_b, p_b), whose rows are the fewer and
// the heavier, so they start first and the first chunk's fill the GPU behind them; the rest take
// the first chunk (binding 0, p). The second's row pass is the code for its type, which build.rs
// (`tandem:pairs a:b`) copies from the files that depend on the type with their names and the
// `_b` names below suffixed. The two chunks share x, y, the bias, the norm prologue and the
// shape. Q6_K takes its `narrow` unit of 32 weights (common/unit_q8_q6_k_narrow.wgsl,
// `tandem:with narrow`): with the 64-weight unit the kernel kept 105 registers, for its Q4_K
// rows too.

override WG: u32 = 256u;
override ROWS: u32 = 4u;  // a power of two; kernels::MatvecShape of the first chunk
override RPT: u32 = 1u;   // rows per thread group: 1, 2 or 4, dividing ROWS

@group(0) @binding(8) var<storage, read> w_b: array<u32>;         // the second chunk's blocks
@group(0) @binding(9) var<storage, read> wv_b: array<vec4<u32>>;  // binding 8 as 16-byte runs
@group(0) @binding(10) var<uniform> p_b: Params;                  // its rows and y_offset

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let threads = WG * RPT / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let second = (p_b.n_rows + ROWS - 1u) / ROWS;
    let i = wg.x + wg.y * nwg.x;
    if (i < second) {
        let row0 = i * ROWS + slot * RPT;
        let sum = decode_rows_b(row0, lane, threads, inv);
        for (var r = lane; r < RPT; r += threads) {
            if (row0 + r < p_b.n_rows) {
                // store_out indexes y and the bias from p.y_offset.
                store_out(0u, p_b.y_offset - p.y_offset + row0 + r, sum[r]);
            }
        }
    } else {
        let row0 = (i - second) * ROWS + slot * RPT;
        let sum = decode_rows(row0, lane, threads, inv);
        for (var r = lane; r < RPT; r += threads) {
            if (row0 + r < p.n_rows) {
                store_out(0u, row0 + r, sum[r]);
            }
        }
    }
}
