// tandem:include common/bits.wgsl
// tandem:include common/mat_io.wgsl
// tandem:include common/rms_fold.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/q8_stage.wgsl
// tandem:include common/unit_q8.wgsl
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

const Q8_TOKENS: u32 = 1u;
const Q8_CHUNK: u32 = 4096u;

@group(0) @binding(6) var<storage, read> norm_w: array<vec4<f32>>;  // [n_cols] or unused
@group(0) @binding(7) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs

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
    let scale = rms_fold_scale(row_sum(x_ss, inv, WG), p.n_cols, p.eps);
    for (var i = lane; i < RPT; i += threads) {
        let row = row0 + i;
        if (row < p.n_rows) {
            store_out(0u, row, sum[i] * scale);
        }
    }
}
