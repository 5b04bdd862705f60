// tandem:include common/bits.wgsl
// tandem:include common/mat_io.wgsl
// tandem:include common/coop_stage.wgsl
// tandem:include common/coop_w8.wgsl
// tandem:per-qtype
// tandem:coop
//
// Y[t, y_offset + r] (+)= sum_k W[r, k] * X[t, k] (+ bias), as matmul.wgsl, on the adapter's
// matrix units (tensor cores) through wgpu's cooperative matrices: f16 operands, f32
// accumulation. Native only (no browser exposes cooperative matrices to WGSL yet); taken where
// the adapter has 16x16x16 f16 x f16 -> f32 fragments and 32-wide subgroups (`GpuFeatures::coop`).
// Work split: a workgroup computes a 128-token x 64-row tile of Y (grid [n_rows / 64, n / 128]);
// its 8 subgroups of 32 threads each own 32 tokens x 32 rows, 2 x 2 accumulator fragments. Each
// k step of 32 columns stages the 128x32 activation tile (as f16, token-major: fragment A,
// row-major) and the dequantized 64x32 weight tile (as f16, row-major in W, so column-major as
// fragment B = W^T) in workgroup memory, each thread loading 16 activations (two 16-byte loads
// of x as f16, which to_f16.wgsl converted once for all tiles: the loads a thread waits on each
// step bound these kernels, bench/RESULTS.md "Twenty-first session") and dequantizing one unit of
// 8 weights (each weight serves 128 tokens: dequantization was the limit at 64); the next step's
// are loaded into registers while this one is multiplied (2 x 2 x 2 fragment products a
// subgroup). Each result fragment goes through the subgroup's 16x16 of workgroup
// memory so that the epilogue (bias, accumulate, bounds) is the plain kernels' `store_out`.
// 23 KiB of workgroup memory in all. The staging: common/coop_stage.wgsl.
// X is rounded to f16 (by to_f16.wgsl), as llama.cpp's cooperative-matrix kernels do.

const TM: u32 = 64u;     // weight rows of the tile (Y's columns)
const TN: u32 = 128u;    // tokens of the tile

@group(0) @binding(8) var<storage, read> xh: array<vec4<u32>>;   // x as f16, 8 a vec4 (to_f16.wgsl)
@group(0) @binding(7) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs

var<workgroup> xs: array<vec4<f16>, 1280>;   // [TN][LDV] activations
var<workgroup> ws: array<vec4<f16>, 640>;   // [TM][LDV] weights
var<workgroup> cs: array<f32, 2048>;   // [subgroup][16][16] a result fragment each

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let n_tok = step_rows(step, p.rows_mode);
    let row0 = wg.x * TM;
    let tok0 = wg.y * TN;
    let bpr = p.n_cols / QK;
    let cols8 = p.n_cols / 8u;
    // This subgroup's part: tokens st .. st + 31, rows sr .. sr + 31 (tile-relative).
    let st = (sg / 2u) * 32u;
    let sr = (sg % 2u) * 32u;
    // Staging: weight row wr, unit wu of 8 columns; activation token xt, 8-column chunks xc
    // and xc + 2.
    let wr = lid / 4u;
    let wu = lid % 4u;
    let w_ok = row0 + wr < p.n_rows;
    let wb = (row0 + wr) * bpr;
    let xt = lid / 2u;
    let xc = lid % 2u;
    let x_ok = tok0 + xt < n_tok;
    let xo = (tok0 + xt) * cols8 + xc;

    var a00 = coop_mat16x16<f32, C>();
    var a01 = coop_mat16x16<f32, C>();
    var a10 = coop_mat16x16<f32, C>();
    var a11 = coop_mat16x16<f32, C>();

    var wq = coop_w8(w_ok, wb, wu, 0u);
    var xv = coop_load_x16(x_ok, xo);

    for (var k0 = 0u; k0 < p.n_cols; k0 += TK) {
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
        workgroupBarrier();
    }

    // naga's SPIR-V wants each pointer's index a value of its own.
    let cb = sg * 256u;
    coopStoreT(a00, &cs[cb], 16u);
    workgroupBarrier();
    emit(cb, lane, tok0 + st, row0 + sr, n_tok);
    workgroupBarrier();
    coopStoreT(a01, &cs[cb], 16u);
    workgroupBarrier();
    emit(cb, lane, tok0 + st, row0 + sr + 16u, n_tok);
    workgroupBarrier();
    coopStoreT(a10, &cs[cb], 16u);
    workgroupBarrier();
    emit(cb, lane, tok0 + st + 16u, row0 + sr, n_tok);
    workgroupBarrier();
    coopStoreT(a11, &cs[cb], 16u);
    workgroupBarrier();
    emit(cb, lane, tok0 + st + 16u, row0 + sr + 16u, n_tok);
}

// Writes the 16x16 fragment staged at cs[cb ..] (token-major) as tokens t0 .., rows r0 .. of Y:
// lane l takes row r0 + l % 16 of tokens t0 + l / 16, + 2, .. (those inside the matrix and the
// pass).
fn emit(cb: u32, lane: u32, t0: u32, r0: u32, n_tok: u32) {
    let c = lane % 16u;
    if (r0 + c >= p.n_rows) {
        return;
    }
    for (var t = lane / 16u; t < 16u; t += 2u) {
        if (t0 + t < n_tok) {
            store_out(t0 + t, r0 + c, cs[cb + t * 16u + c]);
        }
    }
}
