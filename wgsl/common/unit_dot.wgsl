// The decode dot products (matvec.wgsl, matvec_glu.wgsl, moe_gate_up.wgsl, moe_down.wgsl) by units
// of UNIT weights of a row: unit_dot(rb, u, xo) = W[row, UNIT u .. UNIT u + UNIT] . x', where the
// row's blocks start at block rb of `w`; unit_dot2(gb, ub, u, xo) the same unit of a gate row
// (blocks from gb) and an up row (from ub) at once, reading x' once. x' comes from the includer's
// `fn xv(i: u32) -> vec4<f32>`: elements 4 (i - xo) .. + 4 of the vector the row is dotted with.
// Every unit function, here and in the twins, calls xv exactly once for each vec4 of x its unit
// covers (common/rms_fold.wgsl sums x^2 through those calls).
// This is the generic unit, 8 weights from dequant8; a type whose blocks allow a cheaper one has
// a twin common/unit_dot_<qtype>.wgsl with the same functions (build.rs swaps it in). The host
// knows each type's UNIT (kernels::decode_unit). Include-only; the includer gets QK, `w` and
// dequant8 from its common/quant_*.wgsl.

const UNIT: u32 = 8u;

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
    let k = u * 8u;
    let v = dequant8(rb + k / QK, (k % QK) / 8u);
    return dot(v[0], xv(xo + 2u * u)) + dot(v[1], xv(xo + 2u * u + 1u));
}

fn unit_dot2(gb: u32, ub: u32, u: u32, xo: u32) -> vec2<f32> {
    let k = u * 8u;
    let x0 = xv(xo + 2u * u);
    let x1 = xv(xo + 2u * u + 1u);
    let j = (k % QK) / 8u;
    let g = dequant8(gb + k / QK, j);
    let v = dequant8(ub + k / QK, j);
    return vec2<f32>(dot(g[0], x0) + dot(g[1], x1), dot(v[0], x0) + dot(v[1], x1));
}
