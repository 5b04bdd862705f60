// tandem:include common/bits.wgsl
// tandem:include common/step.wgsl
// tandem:include common/rms_fold.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/act.wgsl
// tandem:include common/glu_io.wgsl
// tandem:include common/unit_dot.wgsl
// tandem:include common/glu_rows.wgsl
// tandem:per-qtype
// tandem:subgroups
//
// h[r] = act(G[r, :] . x') * (U[r, :] . x') for one token: the decode FFN's gate and up
// projections and the gated activation (SwiGLU: SiLU; GeGLU: GELU-tanh) in one dispatch, over
// the stacked weight [G; U] (rows r and n_rows + r). x' is x, or RMSNorm(x) * norm_w with the
// norm prologue (flags bit 2) folded into the row pass (common/rms_fold.wgsl).
// Work split: as matvec.wgsl, each workgroup takes ROWS output rows in groups of RPT; the
// threads of a group stride over the units, reading each unit's x' once for the gate and up rows
// of all RPT outputs, then reduce the gate sums, the up sums (row_sum4 each) and the prologue's
// sum of x^2 (common/reduce.wgsl, or its subgroup twin in the `_sg` variants).

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
    var d = GluDots(vec4<f32>(0.0), vec4<f32>(0.0));
    if (row0 < p.n_rows) {
        d = glu_dots(0u, p.n_rows * (p.n_cols / QK), row0, p.n_rows - 1u, 0u, lane, threads);
    }
    let out = glu_outputs(d, inv, threads, threads);
    for (var i = lane; i < RPT; i += threads) {
        if (row0 + i < p.n_rows) {
            h[row0 + i] = out[i];
        }
    }
}
