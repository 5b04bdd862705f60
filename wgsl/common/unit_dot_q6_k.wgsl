// tandem:include common/unit_blocks.wgsl
// Q6_K's twin of common/unit_dot.wgsl (the same functions, through common/unit_blocks.wgsl). Its
// unit is 16 weights: 4 positions l0 .. l0 + 4 of one half h of a block in each of its four
// quarters t, which share their quant words (the low and the high nibbles of two ql words, the
// four 2-bit fields of one qh word) and scale words, so each quant word is loaded once (the
// generic unit loads each ql word twice):
//   W . x = d sum_t sc_t (q_t . x_t - 32 sum(x_t)).
// Unit u of a row lies in block u / 16; with i = u % 16, h = i / 8 and l0 = 4 (i % 8) it holds
// weights 128h + 32t + l0 .. + 4 (layout in common/quant_q6_k.wgsl).

const UNIT: u32 = 16u;

// x' at one unit's weights: quarter t's four in column t of x, and each quarter's sum, shared by
// every row the thread serves.
struct UnitX {
    x: mat4x4<f32>,
    sums: vec4<f32>,
}

fn unit_x(u: u32, xo: u32) -> UnitX {
    let i = xo + (u / 16u) * 64u + ((u % 16u) / 8u) * 32u + u % 8u;
    let x = mat4x4<f32>(xv(i), xv(i + 8u), xv(i + 16u), xv(i + 24u));
    return UnitX(x, vec4<f32>(1.0) * x);
}

// The unit's dot product with the weights of block b.
fn unit_w_dot(b: u32, u: u32, xs: UnitX) -> f32 {
    let blk = q6k_block(b);
    let base = blk.base;
    let i = u % 16u;
    let h = i / 8u;
    let l0 = (i % 8u) * 4u;
    // ql[64h + l] holds quarters 0 (low nibble) and 2 (high), ql[64h + 32 + l] quarters 1 and 3,
    // qh[32h + l] the top two bits of each quarter, bits 2t .. 2t + 1.
    let lq = w[base + (64u * h + l0) / 4u];
    let hq = w[base + (64u * h + l0) / 4u + 8u];
    let top = unpack_u8x4(w[base + 32u + (32u * h + l0) / 4u]);
    let m = vec4<u32>(3u);
    let q0 = unpack_nibbles(lq, 0u) | ((top & m) << vec4<u32>(4u));
    let q1 = unpack_nibbles(hq, 0u) | (((top >> vec4<u32>(2u)) & m) << vec4<u32>(4u));
    let q2 = unpack_nibbles(lq, 4u) | (((top >> vec4<u32>(4u)) & m) << vec4<u32>(4u));
    let q3 = unpack_nibbles(hq, 4u) | ((top >> vec4<u32>(6u)) << vec4<u32>(4u));
    let qd = vec4<f32>(dot(vec4<f32>(q0), xs.x[0]), dot(vec4<f32>(q1), xs.x[1]),
                       dot(vec4<f32>(q2), xs.x[2]), dot(vec4<f32>(q3), xs.x[3]));
    // Quarter t's scale is sc[8h + l0 / 16 + 2t]: bytes j and j + 2 of two consecutive words.
    let s0 = unpack_i8x4(w[base + 48u + 2u * h]);
    let s1 = unpack_i8x4(w[base + 49u + 2u * h]);
    let j = l0 / 16u;
    let sc = vec4<f32>(vec4<i32>(s0[j], s0[j + 2u], s1[j], s1[j + 2u]));
    return blk.d * dot(sc, qd - 32.0 * xs.sums);
}
