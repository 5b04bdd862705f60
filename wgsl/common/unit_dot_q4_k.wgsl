// tandem:include common/unit_blocks.wgsl
// Q4_K's twin of common/unit_dot.wgsl (the same functions, through common/unit_blocks.wgsl). Its
// unit is 16 weights: the low nibbles of two quant words (8 weights of sub-block 2p) and their
// high nibbles (the same positions of sub-block 2p + 1), so each quant word is loaded once (the
// generic unit loads it twice, once a nibble), the block header once per 16 weights, and the min
// term is one multiply per sub-block:
//   W . x = d (sc_a (q_a . x_a) + sc_b (q_b . x_b)) - dmin (m_a sum(x_a) + m_b sum(x_b)).
// A thread still reads 8 quant bytes a unit, as with the generic unit: the decode matvecs want
// many threads in flight more than long per-thread chains (bench/RESULTS.md).
// Unit u of a row lies in block u / 16; with p = (u % 16) / 4 and q = u % 4 it reads quant words
// 4 + 8p + 2q and the next of the block (layout in common/quant_q4_k.wgsl), weights 64p + 8q +
// 0..8 (low nibbles) and 64p + 32 + 8q + 0..8 (high).

const UNIT: u32 = 16u;

// x' at one unit's weights: the low nibbles' 8 in lo's two columns, the high nibbles' in hi's,
// and the sum of each, shared by the gate and up rows of unit_dot2.
struct UnitX {
    lo: mat2x4<f32>,
    hi: mat2x4<f32>,
    sums: vec2<f32>,
}

fn unit_x(u: u32, xo: u32) -> UnitX {
    let i = xo + (u / 16u) * 64u + ((u % 16u) / 4u) * 16u + (u % 4u) * 2u;
    let lo = mat2x4<f32>(xv(i), xv(i + 1u));
    let hi = mat2x4<f32>(xv(i + 8u), xv(i + 9u));
    let one = vec4<f32>(1.0);
    return UnitX(lo, hi, vec2<f32>(dot(lo[0] + lo[1], one), dot(hi[0] + hi[1], one)));
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
    let p = (u % 16u) / 4u;
    let a = k4_scale_min(base + 1u, 2u * p);
    let c = k4_scale_min(base + 1u, 2u * p + 1u);
    let q = base + 4u + p * 8u + (u % 4u) * 2u;
    let qd = nibble_dots(w[q], xs.lo[0], xs.hi[0]) + nibble_dots(w[q + 1u], xs.lo[1], xs.hi[1]);
    return dm.x * (a.x * qd.x + c.x * qd.y) - dm.y * (a.y * xs.sums.x + c.y * xs.sums.y);
}
