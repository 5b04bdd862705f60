// tandem:include common/unit_blocks.wgsl
// Q4_K's twin of common/unit_dot.wgsl (the same functions, through common/unit_blocks.wgsl). Its
// unit is 32 weights: the low nibbles of four quant words (16 weights of sub-block 2p) and their
// high nibbles (the same positions of sub-block 2p + 1), so each quant word is loaded once, the
// block header once per 32 weights, and the min term is one multiply per sub-block:
//   W . x = d (sc_a (q_a . x_a) + sc_b (q_b . x_b)) - dmin (m_a sum(x_a) + m_b sum(x_b)).
// Unit u of a row lies in block u / 8; with p = (u % 8) / 2 and h = u % 2 it reads quant words
// 4 + 8p + 4h .. + 4 of the block (layout in common/quant_q4_k.wgsl), weights 64p + 16h + 0..16
// (low nibbles) and 64p + 32 + 16h + 0..16 (high).

const UNIT: u32 = 32u;

// x' at one unit's weights: vec4 t of the low (high) nibbles' 16 in column t of lo (hi), and the
// sums of each half, shared by the gate and up rows of unit_dot2.
struct UnitX {
    lo: mat4x4<f32>,
    hi: mat4x4<f32>,
    sums: vec2<f32>,
}

fn unit_x(u: u32, xo: u32) -> UnitX {
    let i = xo + (u / 8u) * 64u + ((u % 8u) / 2u) * 16u + (u % 2u) * 4u;
    let lo = mat4x4<f32>(xv(i), xv(i + 1u), xv(i + 2u), xv(i + 3u));
    let hi = mat4x4<f32>(xv(i + 8u), xv(i + 9u), xv(i + 10u), xv(i + 11u));
    let one = vec4<f32>(1.0);
    return UnitX(lo, hi, vec2<f32>(dot(lo * one, one), dot(hi * one, one)));
}

// (q_a . x_a, q_b . x_b) over one quant word of the unit and its x' (lo, hi).
fn nibble_dots(v: u32, lo: vec4<f32>, hi: vec4<f32>) -> vec2<f32> {
    return vec2<f32>(dot(vec4<f32>(unpack_nibbles(v, 0u)), lo),
                     dot(vec4<f32>(unpack_nibbles(v, 4u)), hi));
}

// The unit's dot product with the weights of block b.
fn unit_w_dot(b: u32, u: u32, xs: UnitX) -> f32 {
    let base = b * 36u;
    let dm = unpack2x16float(w[base]);
    let p = (u % 8u) / 2u;
    let a = k4_scale_min(base + 1u, 2u * p);
    let c = k4_scale_min(base + 1u, 2u * p + 1u);
    let q = base + 4u + p * 8u + (u % 2u) * 4u;
    let qd = nibble_dots(w[q], xs.lo[0], xs.hi[0]) + nibble_dots(w[q + 1u], xs.lo[1], xs.hi[1])
        + nibble_dots(w[q + 2u], xs.lo[2], xs.hi[2]) + nibble_dots(w[q + 3u], xs.lo[3], xs.hi[3]);
    return dm.x * (a.x * qd.x + c.x * qd.y) - dm.y * (a.y * xs.sums.x + c.y * xs.sums.y);
}
