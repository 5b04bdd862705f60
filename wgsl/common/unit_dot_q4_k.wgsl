// tandem:include common/unit_blocks.wgsl
// tandem:include common/q4_k_wide.wgsl
// Q4_K's twin of common/unit_dot.wgsl (the same functions, through common/unit_blocks.wgsl). Its
// unit is 32 weights: the low nibbles of four consecutive quant words (16 weights of sub-block
// 2p) and their high nibbles (the same positions of sub-block 2p + 1), two 16-byte loads
// (common/q4_k_wide.wgsl; scalar loads of the same bytes are up to nine load instructions).
//   W . x = d (sc_a (q_a . x_a) + sc_b (q_b . x_b)) - dmin (m_a sum(x_a) + m_b sum(x_b)).
// Unit u of a row lies in block u / 8; with j = u % 8, p = j / 2 and h = j % 2 it reads quant
// words 4 + 8p + 4h .. + 4 of the block (layout in common/quant_q4_k.wgsl), weights 64p + 16h +
// 0..16 (low nibbles) and 64p + 32 + 16h + 0..16 (high).

const UNIT: u32 = 32u;

fn nib_f32(v: u32, shift: u32) -> vec4<f32> {
    return vec4<f32>(unpack_nibbles(v, shift));
}

// x' at one unit's weights: the low nibbles' 16 in lo's columns, the high nibbles' in hi's,
// and the sum of each, shared by every row the thread serves.
struct UnitX {
    lo: mat4x4<f32>,
    hi: mat4x4<f32>,
    sums: vec2<f32>,
}

fn unit_x(u: u32, xo: u32) -> UnitX {
    let j = u % 8u;
    let i = xo + (u / 8u) * 64u + (j / 2u) * 16u + (j % 2u) * 4u;
    let lo = mat4x4<f32>(xv(i), xv(i + 1u), xv(i + 2u), xv(i + 3u));
    let hi = mat4x4<f32>(xv(i + 8u), xv(i + 9u), xv(i + 10u), xv(i + 11u));
    let one = vec4<f32>(1.0);
    return UnitX(lo, hi, vec2<f32>(dot(lo[0] + lo[1] + lo[2] + lo[3], one),
                                   dot(hi[0] + hi[1] + hi[2] + hi[3], one)));
}

// The unit's dot product with the weights of block b.
fn unit_w_dot(b: u32, u: u32, xs: UnitX) -> f32 {
    let k = q4k_unit(b, u % 8u);
    let q = k.q;
    let lo = dot(nib_f32(q.x, 0u), xs.lo[0]) + dot(nib_f32(q.y, 0u), xs.lo[1])
           + dot(nib_f32(q.z, 0u), xs.lo[2]) + dot(nib_f32(q.w, 0u), xs.lo[3]);
    let hi = dot(nib_f32(q.x, 4u), xs.hi[0]) + dot(nib_f32(q.y, 4u), xs.hi[1])
           + dot(nib_f32(q.z, 4u), xs.hi[2]) + dot(nib_f32(q.w, 4u), xs.hi[3]);
    return dot(k.scale, vec2<f32>(lo, hi)) - dot(k.min, xs.sums);
}
