// Units of 32 weights of a row for the small-batch matvec (matvec_batch.wgsl), which dequantizes
// a unit once and dots it with the x of several tokens:
//   unit32(rb, u)    the weights of unit u of the row whose blocks start at block rb, as two
//                    mat4x4 (eight vec4s);
//   unit32_x(u, h)   the indices (in vec4s, from the start of a token's row of x) of the x
//                    columns the four vec4s of half h (0, 1) multiply.
// This generic unit is 32 consecutive weights (four dequant8); a type whose blocks allow a cheaper
// one has a twin common/unit32_<qtype>.wgsl with the same functions (build.rs swaps it in).
// Include-only; the includer gets QK, `w` and dequant8 from its common/quant_*.wgsl, and
// n_cols must be a multiple of 32.

// Weights k .. k + 8 of the row whose blocks start at rb (blocks may be shorter than 32: F32).
fn part8(rb: u32, k: u32) -> array<vec4<f32>, 2> {
    return dequant8(rb + k / QK, (k % QK) / 8u);
}

fn unit32(rb: u32, u: u32) -> array<mat4x4<f32>, 2> {
    let k = u * 32u;
    let a0 = part8(rb, k);
    let a1 = part8(rb, k + 8u);
    let a2 = part8(rb, k + 16u);
    let a3 = part8(rb, k + 24u);
    return array<mat4x4<f32>, 2>(mat4x4<f32>(a0[0], a0[1], a1[0], a1[1]),
                                 mat4x4<f32>(a2[0], a2[1], a3[0], a3[1]));
}

fn unit32_x(u: u32, h: u32) -> vec4<u32> {
    let i = 8u * u + 4u * h;
    return vec4<u32>(i, i + 1u, i + 2u, i + 3u);
}
