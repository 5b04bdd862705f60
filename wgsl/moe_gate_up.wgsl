// tandem:include common/bits.wgsl
// tandem:include common/rms_fold.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/act.wgsl
// tandem:include common/unit_dot.wgsl
// tandem:include common/glu_rows.wgsl
// tandem:include common/moe_gate_up_io.wgsl
// tandem:per-qtype
// tandem:subgroups
//
// h[j, r] = act(G_e[r, :] . x'[t]) * (U_e[r, :] . x'[t]) for each route j = t k + i of the few
// tokens t of a decode or small pass (the i-th of token t's k routes), e = route[j].id: the
// routed experts' gate and up projections with the activation (SiLU; GELU-tanh) fused. x' = x,
// or RMSNorm(x) * norm_w with flags bit 2 (the FFN norm in the prologue, folded into the row
// pass: common/rms_fold.wgsl). Routes whose expert lies outside this weight chunk
// [e0, e0 + n_exp) are left to the dispatch of the chunk that holds it.
// With flags bit 3 (layers of at most MAX_E experts), each workgroup first routes its route's
// token itself from the router logits (common/route.wgsl, as moe_router does) and the workgroups
// of the first grid column write the routes (id, weight) for moe_down, so the pass has no
// moe_router dispatch; otherwise the routes come from moe_router. Each of a token's k workgroup
// rows repeats its routing, in a decode step as in a pass of a few tokens.
// Weight layout (made at load from ffn_gate_exps and ffn_up_exps, [n_expert, n_ff, n_embd] each):
// per expert its n_ff gate rows then its n_ff up rows, so expert e - e0 starts at row
// 2 * n_ff * (e - e0) of the chunk.
// Work split: a workgroup per (ROWS rows, route j): grid [n_ff / ROWS, k n_tokens] (an expert two
// tokens chose is read for each, the second time mostly from the cache, as one dispatch runs
// both); as in matvec_glu.wgsl, the rows go in groups of RPT, and the threads of a group stride
// over the units (common/unit_dot.wgsl or the type's twin), reading each unit's x' once for the
// gate and up rows of all RPT outputs, then reduce the gate sums, the up sums (row_sum4 each) and
// the prologue's sum of x^2 (common/reduce.wgsl, or its subgroup twin in the `_sg` variants).

override WG: u32 = 256u;
override ROWS: u32 = 4u;
override RPT: u32 = 1u;  // rows per thread group: 1, 2 or 4, dividing ROWS

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let threads = WG * RPT / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row0 = wg.x * ROWS + slot * RPT;
    let j = wg.y;
    let xo = j / p.k * (p.n_cols / 4u);  // the route's token's row of x
    rms_row = xo;
    let e = route_expert(j, wg.x, nwg.y, inv);
    let mine = e >= p.e0 && e < p.e0 + p.n_exp;
    var d = GluDots(vec4<f32>(0.0), vec4<f32>(0.0));
    if (mine && row0 < p.n_ff) {
        let up = p.n_ff * (p.n_cols / QK);  // an expert's up rows follow its gate rows
        d = glu_dots(2u * (e - p.e0) * up, up, row0, p.n_ff - 1u, xo, lane, threads);
    }
    let out = glu_outputs(d, inv, threads, threads);
    for (var i = lane; i < RPT; i += threads) {
        if (mine && row0 + i < p.n_ff) {
            h[j * p.n_ff + row0 + i] = out[i];
        }
    }
}
