// tandem:include common/unit_blocks.wgsl
// Q6_K's twin of common/unit_dot.wgsl (the same functions, through common/unit_blocks.wgsl). Its
// unit is 32 weights: 8 positions l0 .. l0 + 8 of one half h of a block in each of its four
// quarters t, which share their quant words (the low nibbles and the high nibbles of two ql words,
// the four 2-bit fields of a qh word, for each 4 positions) and two scale words, so each quant word
// is loaded once:
//   W . x = d sum_t sc_t (q_t . x_t - 32 sum(x_t)).
// Unit u of a row lies in block u / 8; with i = u % 8, h = i / 4 and l0 = 8 (i % 4) it holds
// weights 128h + 32t + l0 .. + 8 (layout in common/quant_q6_k.wgsl).

const UNIT: u32 = 32u;

// x' at one unit's weights: quarter t's first four in column t of a, its last four in column t of
// b, and each quarter's sum, shared by the gate and up rows of unit_dot2.
struct UnitX {
    a: mat4x4<f32>,
    b: mat4x4<f32>,
    sums: vec4<f32>,
}

fn unit_x(u: u32, xo: u32) -> UnitX {
    let i = xo + (u / 8u) * 64u + ((u % 8u) / 4u) * 32u + (u % 4u) * 2u;
    let a = mat4x4<f32>(xv(i), xv(i + 8u), xv(i + 16u), xv(i + 24u));
    let b = mat4x4<f32>(xv(i + 1u), xv(i + 9u), xv(i + 17u), xv(i + 25u));
    let one = vec4<f32>(1.0);
    return UnitX(a, b, one * (a + b));
}

// (q_t . x_t) for t = 0..3 over four positions: ql words lq (quarters 0 and 2) and hq (1 and 3),
// qh word qh, and x' of each quarter at those positions (the columns of xs).
fn quarter_dots(lq: u32, hq: u32, qh: u32, xs: mat4x4<f32>) -> vec4<f32> {
    let hi = unpack_u8x4(qh);
    let m = vec4<u32>(3u);
    let q0 = unpack_nibbles(lq, 0u) | ((hi & m) << vec4<u32>(4u));
    let q1 = unpack_nibbles(hq, 0u) | (((hi >> vec4<u32>(2u)) & m) << vec4<u32>(4u));
    let q2 = unpack_nibbles(lq, 4u) | (((hi >> vec4<u32>(4u)) & m) << vec4<u32>(4u));
    let q3 = unpack_nibbles(hq, 4u) | ((hi >> vec4<u32>(6u)) << vec4<u32>(4u));
    return vec4<f32>(dot(vec4<f32>(q0), xs[0]), dot(vec4<f32>(q1), xs[1]),
                     dot(vec4<f32>(q2), xs[2]), dot(vec4<f32>(q3), xs[3]));
}

// The unit's dot product with the weights of block b.
fn unit_w_dot(b: u32, u: u32, xs: UnitX) -> f32 {
    let pair = (b >> 1u) * 105u;
    let d = f16_at(w[pair], b & 1u);
    let base = pair + 1u + (b & 1u) * 52u;
    let i = u % 8u;
    let h = i / 4u;
    let l0 = (i % 4u) * 8u;
    let ql = base + (64u * h + l0) / 4u;
    let qh = base + 32u + (32u * h + l0) / 4u;
    // Quarter t's scale is sc[8h + l0 / 16 + 2t]: bytes j and j + 2 of two consecutive words.
    let s0 = unpack_i8x4(w[base + 48u + 2u * h]);
    let s1 = unpack_i8x4(w[base + 49u + 2u * h]);
    let j = l0 / 16u;
    let sc = vec4<f32>(vec4<i32>(s0[j], s0[j + 2u], s1[j], s1[j + 2u]));
    let qd = quarter_dots(w[ql], w[ql + 8u], w[qh], xs.a)
        + quarter_dots(w[ql + 1u], w[ql + 9u], w[qh + 1u], xs.b);
    return d * dot(sc, qd - 32.0 * xs.sums);
}
