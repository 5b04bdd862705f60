// tandem:include common/bits.wgsl
// tandem:include common/rms_fold.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/act.wgsl
// tandem:include common/glu_io.wgsl
// tandem:include common/q8_stage.wgsl
// tandem:include common/unit_q8.wgsl
// tandem:include common/glu_rows_q8.wgsl
// tandem:qtypes q4_k q6_k q8_0
// tandem:subgroups
//
// matvec_glu.wgsl (read it first) with x' staged as int8 as in matvec_q8.wgsl: per chunk of
// Q8_CHUNK columns the workgroup stages x' once, then each group of RPT outputs dots the chunk's
// units with their gate and up rows by dot4I8Packed (common/glu_rows_q8.wgsl).

override WG: u32 = 256u;
override ROWS: u32 = 4u;  // a power of two; set per adapter by kernels::matvec_rows
override RPT: u32 = 1u;   // rows per thread group: 1, 2 or 4, dividing ROWS

const Q8_TOKENS: u32 = 1u;
const Q8_CHUNK: u32 = 4096u;

// The one token's x (common/q8_stage.wgsl).
fn x_row(t: u32) -> u32 {
    return 0u;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let threads = WG * RPT / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row0 = (wg.x + wg.y * nwg.x) * ROWS + slot * RPT;
    let bpr = p.n_cols / QK;
    let d = glu_dots_q8(row0 < p.n_rows, 0u, p.n_rows * bpr, row0, p.n_rows - 1u, lane, threads,
                        inv.lid);
    let out = glu_outputs(d, inv, threads, WG);
    for (var i = lane; i < RPT; i += threads) {
        if (row0 + i < p.n_rows) {
            h[row0 + i] = out[i];
        }
    }
}
