// tandem:include common/bits.wgsl
// tandem:include common/rms_fold.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/act.wgsl
// tandem:include common/glu_io.wgsl
// tandem:include common/q8_stage.wgsl
// tandem:include common/unit_q8.wgsl
// tandem:qtypes q4_k q6_k q8_0
// tandem:subgroups
//
// matvec_glu.wgsl (read it first) with x' staged as int8 as in matvec_q8.wgsl: per chunk of
// Q8_CHUNK columns the workgroup stages x' once, then each group of RPT outputs dots the chunk's
// units with their gate and up rows by dot4I8Packed.

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
    let last = p.n_rows - 1u;
    var g = vec4<f32>(0.0);
    var v = vec4<f32>(0.0);
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
                    let gb = min(row0 + r, last) * bpr + b;
                    g[r] += unit_dot_x(unit_w(gb, u0 + u), xs);
                    v[r] += unit_dot_x(unit_w(gb + p.n_rows * bpr, u0 + u), xs);
                }
            }
        }
    }
    let gs = row_sum4(g, inv, threads);
    workgroupBarrier();
    let vs = row_sum4(v, inv, threads);
    let s = rms_fold_scale(row_sum(x_ss, inv, WG), p.n_cols, p.eps);
    for (var i = lane; i < RPT; i += threads) {
        if (row0 + i < p.n_rows) {
            h[row0 + i] = glu_act(gs[i] * s, p.act) * vs[i] * s;
        }
    }
}
