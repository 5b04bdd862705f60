// tandem:include common/unit_blocks.wgsl
// The decode dot products (matvec.wgsl, matvec_glu.wgsl, moe_gate_up.wgsl, moe_down.wgsl) by units
// of UNIT weights of a row: unit_x(u, xo) reads x' at unit u's weights once, and
// unit_w_dot(b, u, xs) dots it with the unit's weights in block b, so a thread that serves
// several rows (or the gate and up rows: common/glu_rows.wgsl) reads x' once for all of them
// (common/unit_blocks.wgsl builds unit_dot on the two). x' comes from the includer's
// `fn xv(i: u32) -> vec4<f32>`: elements 4 (i - xo) .. + 4 of the vector the rows are dotted with.
// Every unit_x, here and in the twins, calls xv exactly once for each vec4 of x its unit covers
// (common/rms_fold.wgsl sums x^2 through those calls).
// This is the generic unit, 8 weights from dequant8; a type whose blocks allow a cheaper one has
// a twin common/unit_dot_<qtype>.wgsl with the same functions (build.rs swaps it in). The host
// knows each type's UNIT (kernels::decode_unit). Include-only; the includer gets QK, `w` and
// dequant8 from its common/quant_*.wgsl.

const UNIT: u32 = 8u;

struct UnitX {
    x: mat2x4<f32>,
}

fn unit_x(u: u32, xo: u32) -> UnitX {
    return UnitX(mat2x4<f32>(xv(xo + 2u * u), xv(xo + 2u * u + 1u)));
}

fn unit_w_dot(b: u32, u: u32, xs: UnitX) -> f32 {
    let v = dequant8(b, ((u * 8u) % QK) / 8u);
    return dot(v[0], xs.x[0]) + dot(v[1], xs.x[1]);
}
