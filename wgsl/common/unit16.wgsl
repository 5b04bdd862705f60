// Units of 16 weights of a row for the small-batch matvec (matvec_batch.wgsl), which dequantizes
// a unit once and dots it with the x of several tokens:
//   unit16(rb, u)  the weights of unit u of the row whose blocks start at block rb, as 4 vec4s;
//   unit16_x(u)    the indices (in vec4s, from the start of a token's row of x) of the x
//                  columns each of those vec4s multiplies.
// This generic unit is 16 consecutive weights (two dequant8); a type whose blocks allow a cheaper
// one has a twin common/unit16_<qtype>.wgsl with the same functions (build.rs swaps it in).
// Include-only; the includer gets QK, `w` and dequant8 from its common/quant_*.wgsl, and
// n_cols must be a multiple of 16.

fn unit16(rb: u32, u: u32) -> mat4x4<f32> {
    let k = u * 16u;
    let a = dequant8(rb + k / QK, (k % QK) / 8u);
    let b = dequant8(rb + (k + 8u) / QK, ((k + 8u) % QK) / 8u);
    return mat4x4<f32>(a[0], a[1], b[0], b[1]);
}

fn unit16_x(u: u32) -> vec4<u32> {
    let i = 4u * u;
    return vec4<u32>(i, i + 1u, i + 2u, i + 3u);
}
