// tandem:include common/bits.wgsl
// tandem:include common/moe_down_batch_io.wgsl
// tandem:include common/coop_stage.wgsl
// tandem:include common/coop_w8.wgsl
// tandem:per-qtype
// tandem:coop
//
// o[s, r] = weight_s * (D_e[r, :] . h[s, :]) for every route slot s = t * k + j of a batched
// pass, e = route[s].id, as moe_down_batch.wgsl computes it, on the adapter's matrix units (f16
// operands, f32 accumulation; `GpuFeatures::coop`), h as f16 (moe_gate_up_batch_coop.wgsl's).
// The sum over a token's k slots and the residual add follow in moe_combine.wgsl.
// Work split: a workgroup per (64-row tile, expert of this chunk): grid [n_rows / 64, n_exp];
// experts with no slots exit at once. For each tile of 128 of the expert's slots, each k step
// stages the 64 weight rows and the 128 gathered h rows as f16 (common/coop_stage.wgsl); each of
// the 8 subgroups owns 32 slots x 32 rows, 2 x 2 accumulator fragments, which go out one at a
// time through the subgroup's 16 x 16 of workgroup memory.

const TM: u32 = 64u;     // weight rows of the tile
const TN: u32 = 128u;    // slots of a tile

@group(0) @binding(1) var<storage, read> xh: array<vec4<u32>>;  // h as f16, 8 a vec4: [n_tokens * k, n_cols]
@group(0) @binding(6) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs

var<workgroup> ws: array<vec4<f16>, 640>;   // [TM][LDV] weights
var<workgroup> xs: array<vec4<f16>, 1280>;   // [TN][LDV] the gathered h rows
var<workgroup> cs: array<f32, 2048>;   // [subgroup][16][16]; cs[0..2] first passes the
                                       // expert's list (first, count) to every thread

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
    let row0 = wg.x * TM;
    let bpr = p.n_cols / QK;
    let cols8 = p.n_cols / 8u;
    // This subgroup's part: slots st .. st + 31 of the tile, rows sr .. sr + 31.
    let st = (sg / 2u) * 32u;
    let sr = (sg % 2u) * 32u;
    // Staging: weight row wr, unit wu; slot xt's 8-column chunks xc and xc + 2.
    let wr = lid / 4u;
    let wu = lid % 4u;
    let w_ok = row0 + wr < p.n_rows;
    let wb = (wg.y * p.n_rows + row0 + wr) * bpr;
    let xt = lid / 2u;
    let xc = lid % 2u;
    let cb = sg * 256u;
    for (var t0 = 0u; t0 < count; t0 += TN) {
        let x_ok = t0 + xt < count;
        let xo = lists[head + first + min(t0 + xt, count - 1u)] * cols8 + xc;
        var a00 = coop_mat16x16<f32, C>();
        var a01 = coop_mat16x16<f32, C>();
        var a10 = coop_mat16x16<f32, C>();
        var a11 = coop_mat16x16<f32, C>();
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
                let ib0 = sr * LDV + kk / 4u;
                let ib1 = ib0 + 16u * LDV;
                let x0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[ia0], LDV);
                let x1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[ia1], LDV);
                let w0 = coopLoad<coop_mat16x16<f16, B>>(&ws[ib0], LDV);
                let w1 = coopLoad<coop_mat16x16<f16, B>>(&ws[ib1], LDV);
                a00 = coopMultiplyAdd(x0, w0, a00);
                a01 = coopMultiplyAdd(x0, w1, a01);
                a10 = coopMultiplyAdd(x1, w0, a10);
                a11 = coopMultiplyAdd(x1, w1, a11);
            }
        }
        coopStoreT(a00, &cs[cb], 16u);
        workgroupBarrier();
        emit(cb, lane, t0 + st, row0 + sr, count, first, head);
        workgroupBarrier();
        coopStoreT(a01, &cs[cb], 16u);
        workgroupBarrier();
        emit(cb, lane, t0 + st, row0 + sr + 16u, count, first, head);
        workgroupBarrier();
        coopStoreT(a10, &cs[cb], 16u);
        workgroupBarrier();
        emit(cb, lane, t0 + st + 16u, row0 + sr, count, first, head);
        workgroupBarrier();
        coopStoreT(a11, &cs[cb], 16u);
        workgroupBarrier();
        emit(cb, lane, t0 + st + 16u, row0 + sr + 16u, count, first, head);
    }
}

// o[s, r] = weight_s * v for the fragment staged at cs[cb ..] (slot-major): the expert's slots
// j0 .., rows r0 ..; lane l takes row r0 + l % 16 of slots j0 + l / 16, + 2, .. (those the expert
// has, rows inside the matrix), s the slot's route slot.
fn emit(cb: u32, lane: u32, j0: u32, r0: u32, count: u32, first: u32, head: u32) {
    let c = lane % 16u;
    if (r0 + c >= p.n_rows) {
        return;
    }
    for (var t = lane / 16u; t < 16u; t += 2u) {
        if (j0 + t < count) {
            let s = lists[head + first + j0 + t];
            o[s * p.n_rows + r0 + c] = bitcast<f32>(route[s * 2u + 1u]) * cs[cb + t * 16u + c];
        }
    }
}
