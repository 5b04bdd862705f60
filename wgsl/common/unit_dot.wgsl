// One 8-element unit of a decode matvec row (matvec.wgsl, moe_down.wgsl): W[row, 8u .. 8u + 8]
// . (x0, x1), where the row's blocks start at block rb of `w`. Include-only; the includer gets
// QK, `w` and dequant8 from its common/quant_*.wgsl.

fn unit_dot(rb: u32, u: u32, x0: vec4<f32>, x1: vec4<f32>) -> f32 {
    let k = u * 8u;
    let v = dequant8(rb + k / QK, (k % QK) / 8u);
    return dot(v[0], x0) + dot(v[1], x1);
}
