// The workgroup-memory tiles of the cooperative-matrix products (matmul_coop.wgsl,
// moe_gate_up_batch_coop.wgsl, moe_down_batch_coop.wgsl): each k step of TK columns stages 64
// weight rows in `ws` and the tile's token rows in `xs`, as rows of LDV vec4<f16>s (16-byte
// aligned, as the fragments' loads want): the weights row-major as W is stored (so B = W^T is
// column-major), the activations token-major (A, row-major). A thread dequantizes one unit of 8
// weights and stages 16 activations a step, which come as f16 (to_f16.wgsl converts x once for
// all tiles, the gate/up product writes h so), in two 16-byte loads: the loads a thread waits on
// each step bound these kernels (bench/RESULTS.md, twenty-first session). The next step's go into
// registers while the current tiles are multiplied.
// Include-only; the includer declares `var<workgroup> ws: array<vec4<f16>, 640>` ([64][LDV]),
// `var<workgroup> xs: array<vec4<f16>, ...>` ([tokens][LDV]) and its activations as f16, 8 a
// vec4<u32> (`xh`), and includes a weight type's dequant8.

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

// The activations of tile token xt's columns 8 (xc + 2 i) .. + 7, i = 0, 1 (a token row's 32
// columns of the step between two threads): two 16-byte loads of the includer's f16 view `xh`,
// chunks xo and xo + 2 of 8 values (zeros where `ok` is false: tokens past the tile's).
fn coop_load_x16(ok: bool, xo: u32) -> array<vec4<u32>, 2> {
    var v = array<vec4<u32>, 2>();
    for (var i = 0u; i < 2u; i++) {
        v[i] = select(vec4<u32>(0u), xh[select(0u, xo + 2u * i, ok)], ok);
    }
    return v;
}

// Stores them in tile token xt's row.
fn coop_stage_x16(xt: u32, xc: u32, vs: array<vec4<u32>, 2>) {
    for (var i = 0u; i < 2u; i++) {
        let o = xt * LDV + 2u * (xc + 2u * i);
        // Exact: f16 -> f32 -> f16 (naga has no bitcast<vec2<f16>>).
        xs[o] = vec4<f16>(vec4<f32>(unpack2x16float(vs[i].x), unpack2x16float(vs[i].y)));
        xs[o + 1u] = vec4<f16>(vec4<f32>(unpack2x16float(vs[i].z), unpack2x16float(vs[i].w)));
    }
}
