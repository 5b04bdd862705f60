// tandem:include common/q4_k_wide.wgsl
// Q4_K's unit against int8 x' (common/unit_q8.wgsl; read common/unit_dot_q4_k.wgsl first): the
// 32 weights of two 16-byte loads (common/q4_k_wide.wgsl), the low nibbles of four quant words
// (16 weights of sub-block 2p) and their high nibbles (sub-block 2p + 1). The nibbles masked in
// place are four unsigned bytes a word, dotted with x' (common/q8_dot.wgsl's dot16):
//   W . x = sc_a (q_a . x_a) + sc_b (q_b . x_b) - (m_a sum(x_a) + m_b sum(x_b)),
// with sc and m already times the block's d and dmin.

const UNIT: u32 = 32u;

alias UnitW = Q4kUnit;

struct UnitX {
    lo: X16,         // x' at the low nibbles' 16 weights
    hi: X16,         // at the high nibbles'
    d: vec2<f32>,    // their blocks' units (d / 254)
    sums: vec2<f32>, // their sums
}

fn unit_x(t: u32, u: u32) -> UnitX {
    let j = u % 8u;
    let i = (u / 8u) * 16u + (j / 2u) * 4u + (j % 2u);
    let lo = x16(t, i);
    let hi = x16(t, i + 2u);
    let d = vec2<f32>(x_d(t, i / 2u), x_d(t, i / 2u + 1u));
    return UnitX(lo, hi, d, d * vec2<f32>(x_sum(t, i), x_sum(t, i + 2u)));
}

fn unit_w(b: u32, u: u32) -> UnitW {
    return q4k_unit(b, u % 8u);
}

fn unit_dot_x(k: UnitW, xs: UnitX) -> f32 {
    let m = 0x0f0f0f0fu;
    let lo = dot16(k.q & vec4<u32>(m), xs.lo);
    let hi = dot16((k.q >> vec4<u32>(4u)) & vec4<u32>(m), xs.hi);
    return dot(k.scale * xs.d, vec2<f32>(f32(lo), f32(hi))) - dot(k.min, xs.sums);
}
