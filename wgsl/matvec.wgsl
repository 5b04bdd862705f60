// tandem:include common/matvec_dots.wgsl
// tandem:per-qtype
// tandem:subgroups
//
// y[y_offset + r] (+)= sum_k W[r, k] * x'[k] (+ bias[y_offset + r]) for one token: the decode
// matrix-vector product, reading the weights in their quantized blocks. With the norm prologue
// (flags bit 2), x' = RMSNorm(x) * norm_w, folded into the row pass (common/rms_fold.wgsl), which
// saves the separate norm dispatch; otherwise x' = x.
// Work split: each workgroup takes ROWS rows in groups of RPT consecutive rows; the WG * RPT /
// ROWS threads of a group stride over the units (common/unit_dot.wgsl or the type's twin),
// reading each unit's x' once (unit_x) and dotting it with the unit's weights in each of the
// group's rows (unit_w_dot), so x' is read once per RPT rows and RPT rows' loads are in flight;
// then they reduce the RPT sums by row_sum4 and the prologue's sum of x^2 by row_sum
// (common/reduce.wgsl: a tree in workgroup memory; in the `_sg` variants, subgroupAdd and one
// step across subgroups). A group past the last row repeats the last row and writes nothing.
// Workgroups are laid out 2-D (x up to 65535) so a 262k-row vocabulary fits.

override WG: u32 = 256u;
override ROWS: u32 = 4u;  // a power of two; set per adapter by kernels::matvec_rows
override RPT: u32 = 1u;   // rows per thread group: 1, 2 or 4, dividing ROWS

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let threads = WG * RPT / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row0 = (wg.x + wg.y * nwg.x) * ROWS + slot * RPT;
    let sum = decode_rows(row0, lane, threads, inv);
    for (var i = lane; i < RPT; i += threads) {
        let row = row0 + i;
        if (row < p.n_rows) {
            store_out(0u, row, sum[i]);
        }
    }
}
