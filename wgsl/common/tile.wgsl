// Workgroup-memory tiles of the tiled batch kernels (matmul.wgsl, moe_down_batch.wgsl,
// moe_gate_up_batch.wgsl): each k step of TK columns stages dequantized weight rows in `ws`
// ([rows][TK]) and activation rows in `xs` ([TN][TK]), then every thread multiplies from them.
// Include-only; the includer declares `const TK: u32`, `var<workgroup> ws: array<f32, ..>` and
// `var<workgroup> xs: array<f32, ..>`, and gets QK, `w` and dequant8 from its common/quant_*.wgsl.

// Stages the 8 weights of unit wu (columns k0 + 8 wu ..) of weight row `grow` (bpr blocks a row)
// at tile row wr of ws; zeros where !ok (rows past the matrix).
fn stage_w8(wr: u32, wu: u32, ok: bool, grow: u32, k0: u32, bpr: u32) {
    var v = array<vec4<f32>, 2>(vec4<f32>(0.0), vec4<f32>(0.0));
    if (ok) {
        let k = k0 + wu * 8u;
        v = dequant8(grow * bpr + k / QK, (k % QK) / 8u);
    }
    let wo = wr * TK + wu * 8u;
    ws[wo] = v[0].x; ws[wo + 1u] = v[0].y; ws[wo + 2u] = v[0].z; ws[wo + 3u] = v[0].w;
    ws[wo + 4u] = v[1].x; ws[wo + 5u] = v[1].y; ws[wo + 6u] = v[1].z; ws[wo + 7u] = v[1].w;
}

// Stages 4 activations xv at (tile row xt, columns xc..xc+3) of xs.
fn stage_x4(xt: u32, xc: u32, xv: vec4<f32>) {
    let xo = xt * TK + xc;
    xs[xo] = xv.x; xs[xo + 1u] = xv.y; xs[xo + 2u] = xv.z; xs[xo + 3u] = xv.w;
}

// Column kk of the 4 tile rows r..r+3 of ws.
fn tile_w4(r: u32, kk: u32) -> vec4<f32> {
    return vec4<f32>(ws[r * TK + kk], ws[(r + 1u) * TK + kk], ws[(r + 2u) * TK + kk], ws[(r + 3u) * TK + kk]);
}

// acc[j][i] += ws[rb + i] . xs[tb + j] over the TK columns of the staged tiles: the 4 rows x
// 2 tokens of one thread.
fn tile_4x2(acc: ptr<function, array<vec4<f32>, 2>>, rb: u32, tb: u32) {
    for (var kk = 0u; kk < TK; kk++) {
        let wv = tile_w4(rb, kk);
        (*acc)[0] += wv * xs[tb * TK + kk];
        (*acc)[1] += wv * xs[(tb + 1u) * TK + kk];
    }
}
