// tandem:include common/bits.wgsl
// tandem:include common/act.wgsl
// tandem:include common/moe_gate_up_batch_io.wgsl
// tandem:include common/coop_stage.wgsl
// tandem:include common/coop_w8.wgsl
// tandem:per-qtype
// tandem:coop
//
// h[s, r] = act(G_e[r, :] . x[t, :]) * (U_e[r, :] . x[t, :]) for every route slot s = t * k + j
// of a batched pass, e = route[s].id, as moe_gate_up_batch.wgsl computes it, on the adapter's
// matrix units (f16 operands, f32 accumulation; `GpuFeatures::coop`). The token lists per expert
// come from moe_sort.wgsl; x is already normalised, and converted to f16 (to_f16.wgsl); h is
// written as f16, which moe_down_batch_coop.wgsl rounds it to anyway.
// Work split: a workgroup per (32-row tile, expert of this chunk): grid [n_ff / 32, n_exp];
// experts with no tokens exit at once. For each tile of 128 of the expert's tokens, each k step
// stages the tile's 32 gate rows then 32 up rows, and the 128 gathered token rows, as f16
// (common/coop_stage.wgsl); each of the 8 subgroups owns 32 tokens x 16 rows, of the gate and of
// the up product: 4 accumulator fragments. The gate and up fragments of 16 tokens meet in the
// subgroup's 2 x 16 x 16 of workgroup memory, where its lanes apply the activation and write h.

const TR: u32 = 32u;     // output rows of the tile (gate rows, and as many up rows)
const TN: u32 = 128u;    // tokens of a tile

@group(0) @binding(2) var<storage, read_write> h: array<f16>;     // [n_tokens * k, n_ff]
@group(0) @binding(5) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs
@group(0) @binding(6) var<storage, read> xh: array<vec4<u32>>;  // x as f16, 8 a vec4 (to_f16.wgsl)

var<workgroup> ws: array<vec4<f16>, 640>;   // [2 TR][LDV] gate rows, then up rows
var<workgroup> xs: array<vec4<f16>, 1280>;   // [TN][LDV] the gathered token rows
var<workgroup> cs: array<f32, 4096>;   // [subgroup][gate, up][16][16]; cs[0..2] first passes
                                       // the expert's list (first, count) to every thread

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let e = p.e0 + wg.y;
    if (lid == 0u) {
        cs[0] = bitcast<f32>(lists[e]);
        cs[1] = bitcast<f32>(lists[e + 1u] - lists[e]);
    }
    let first = bitcast<u32>(workgroupUniformLoad(&cs[0]));
    let count = bitcast<u32>(workgroupUniformLoad(&cs[1]));
    if (count == 0u) {
        return;
    }
    let head = p.n_expert + 1u;
    let row0 = wg.x * TR;
    let bpr = p.n_cols / QK;
    let cols8 = p.n_cols / 8u;
    // This subgroup's part: tokens st .. st + 31 of the tile, rows sr .. sr + 15.
    let st = (sg / 2u) * 32u;
    let sr = (sg % 2u) * 16u;
    // Staging: tile row wr (gate rows 0..31, then up rows), unit wu; token xt's 8-column chunks
    // xc and xc + 2.
    let wr = lid / 4u;
    let wu = lid % 4u;
    let half = wr / TR;
    let w_ok = row0 + wr % TR < p.n_ff;
    let wb = (wg.y * 2u * p.n_ff + half * p.n_ff + row0 + wr % TR) * bpr;
    let xt = lid / 2u;
    let xc = lid % 2u;
    let cb = sg * 512u;
    for (var t0 = 0u; t0 < count; t0 += TN) {
        let x_ok = t0 + xt < count;
        let xo = lists[head + first + min(t0 + xt, count - 1u)] / p.k * cols8 + xc;
        var g0 = coop_mat16x16<f32, C>();
        var g1 = coop_mat16x16<f32, C>();
        var u0 = coop_mat16x16<f32, C>();
        var u1 = coop_mat16x16<f32, C>();
        var wq = coop_w8(w_ok, wb, wu, 0u);
        var xv = coop_load_x16(x_ok, xo);
        for (var k0 = 0u; k0 < p.n_cols; k0 += TK) {
            workgroupBarrier();  // the last step's (or the last tile's epilogue's) reads are done
            coop_stage_w8(wr, wu, wq);
            coop_stage_x16(xt, xc, xv);
            workgroupBarrier();
            let kn = k0 + TK;
            if (kn < p.n_cols) {
                wq = coop_w8(w_ok, wb, wu, kn);
                xv = coop_load_x16(x_ok, xo + kn / 8u);
            }
            for (var kk = 0u; kk < TK; kk += 16u) {
                // naga's SPIR-V wants each pointer's index a value of its own.
                let ia0 = st * LDV + kk / 4u;
                let ia1 = ia0 + 16u * LDV;
                let ig = sr * LDV + kk / 4u;
                let iu = ig + TR * LDV;
                let x0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[ia0], LDV);
                let x1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[ia1], LDV);
                let w_gate = coopLoad<coop_mat16x16<f16, B>>(&ws[ig], LDV);
                let w_up = coopLoad<coop_mat16x16<f16, B>>(&ws[iu], LDV);
                g0 = coopMultiplyAdd(x0, w_gate, g0);
                u0 = coopMultiplyAdd(x0, w_up, u0);
                g1 = coopMultiplyAdd(x1, w_gate, g1);
                u1 = coopMultiplyAdd(x1, w_up, u1);
            }
        }
        let cu = cb + 256u;
        coopStoreT(g0, &cs[cb], 16u);
        coopStoreT(u0, &cs[cu], 16u);
        workgroupBarrier();
        emit(cb, lane, t0 + st, row0 + sr, count, first, head);
        workgroupBarrier();
        coopStoreT(g1, &cs[cb], 16u);
        coopStoreT(u1, &cs[cu], 16u);
        workgroupBarrier();
        emit(cb, lane, t0 + st + 16u, row0 + sr, count, first, head);
    }
}

// h[s, r] = act(gate) * up for the fragments staged at cs[cb ..] (gate) and cs[cb + 256 ..] (up),
// token-major: the expert's tokens j0 .., rows r0 ..; lane l takes row r0 + l % 16 of tokens
// j0 + l / 16, + 2, .. (those the expert has, rows inside the matrix), s the token's route slot.
fn emit(cb: u32, lane: u32, j0: u32, r0: u32, count: u32, first: u32, head: u32) {
    let c = lane % 16u;
    if (r0 + c >= p.n_ff) {
        return;
    }
    for (var t = lane / 16u; t < 16u; t += 2u) {
        if (j0 + t < count) {
            let s = lists[head + first + j0 + t];
            let i = cb + t * 16u + c;
            h[s * p.n_ff + r0 + c] = f16(glu_act(cs[i], p.act) * cs[i + 256u]);
        }
    }
}
