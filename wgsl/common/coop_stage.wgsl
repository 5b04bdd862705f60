// The workgroup-memory tiles of the cooperative-matrix products (matmul_coop.wgsl,
// moe_gate_up_batch_coop.wgsl, moe_down_batch_coop.wgsl): each k step of TK columns stages 64
// weight rows in `ws` and the tile's token rows in `xs`, as rows of LDV vec4<f16>s (16-byte
// aligned, as the fragments' loads want): the weights row-major as W is stored (so B = W^T is
// column-major), the activations token-major (A, row-major). A thread dequantizes one unit of 8
// weights and converts four vec4s of activations a step; the next step's go into registers while
// the current tiles are multiplied.
// Include-only; the includer declares `var<workgroup> ws: array<vec4<f16>, 640>` ([64][LDV]) and
// `var<workgroup> xs: array<vec4<f16>, ...>` ([tokens][LDV]), and includes a weight type's dequant8.

const TK: u32 = 32u;     // columns a k step
const LDV: u32 = 10u;    // vec4<f16>s a staged row: TK / 4 + 2 (the tiles' element: one store a vec4)

// The 8 weights of unit `wu` of the k step at column k of the weight row whose first block is
// `wb`; zeros for rows past the matrix (`ok` false).
fn coop_load_w8(ok: bool, wb: u32, wu: u32, k: u32) -> array<vec4<f32>, 2> {
    if (!ok) {
        return array<vec4<f32>, 2>();
    }
    let c = k + wu * 8u;
    return dequant8(wb + c / QK, (c % QK) / 8u);
}

// Stores them as columns 8 wu .. 8 wu + 7 of tile row wr.
fn coop_stage_w8(wr: u32, wu: u32, v: array<vec4<f32>, 2>) {
    let o = wr * LDV + wu * 2u;
    ws[o] = vec4<f16>(v[0]);
    ws[o + 1u] = vec4<f16>(v[1]);
}

// Stores the activations vs[i] as columns 4 (xc + 2 i) .. of tile token xt, i = 0..3 (a token
// row's 8 vec4s of the step between two threads).
fn coop_stage_x16(xt: u32, xc: u32, vs: array<vec4<f32>, 4>) {
    for (var i = 0u; i < 4u; i++) {
        xs[xt * LDV + xc + 2u * i] = vec4<f16>(vs[i]);
    }
}
