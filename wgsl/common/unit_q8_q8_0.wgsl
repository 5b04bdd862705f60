// Q8_0's unit against int8 x' (common/unit_q8.wgsl; the layout is in common/quant_q8_0.wgsl): one
// block of 32 int8 weights, dotted with x' as they are (common/q8_dot.wgsl's dot16):
//   W . x = d (q . x). (Pairs of blocks are 68 bytes, so the loads are scalar.)

const UNIT: u32 = 32u;

struct UnitW {
    lo: vec4<u32>,  // weights 0 .. 16 of the block
    hi: vec4<u32>,  // 16 .. 32
    d: f32,
}

struct UnitX {
    lo: X16,
    hi: X16,
    d: f32,  // the x block's unit (d / 254)
}

fn unit_x(t: u32, u: u32) -> UnitX {
    return UnitX(x16(t, 2u * u), x16(t, 2u * u + 1u), x_d(t, u));
}

fn unit_w(b: u32, u: u32) -> UnitW {
    let pair = (b >> 1u) * 17u;
    let q = pair + 1u + (b & 1u) * 8u;
    return UnitW(vec4<u32>(w[q], w[q + 1u], w[q + 2u], w[q + 3u]),
                 vec4<u32>(w[q + 4u], w[q + 5u], w[q + 6u], w[q + 7u]),
                 f16_at(w[pair], b & 1u));
}

fn unit_dot_x(k: UnitW, xs: UnitX) -> f32 {
    return k.d * xs.d * f32(dot16(k.lo, xs.lo) + dot16(k.hi, xs.hi));
}
