// tandem:include common/matvec_q8_dots.wgsl
// tandem:qtypes q4_k q6_k q8_0
// tandem:subgroups
//
// matvec.wgsl (read it first) with x' staged as int8 in workgroup memory (common/q8_stage.wgsl)
// and the weights dotted with it by dot4I8Packed (common/unit_q8.wgsl's twin for the type), for
// adapters whose WGSL has it (GpuFeatures::int8_dot). Per chunk of Q8_CHUNK columns the whole
// workgroup stages x' once, then each group of RPT rows strides over the chunk's units; the
// prologue's sum of x^2 comes from the staging threads, so it is reduced over the workgroup.

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
