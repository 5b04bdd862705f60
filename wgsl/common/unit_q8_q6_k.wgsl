// Q6_K's unit against int8 x' (common/unit_q8.wgsl; the block layout is in
// common/quant_q6_k.wgsl): 64 weights, positions l0 .. l0 + 16 of half h of a block in each of
// its four quarters t, which share their quant words: 16 bytes of ql for quarters 0 (low
// nibbles) and 2 (high), 16 for quarters 1 and 3, 16 of qh (bits 2t .. 2t + 1 for quarter t), so
// every byte of the block is loaded once. A quarter's 6-bit quants, assembled in place as four
// unsigned bytes a word, are dotted with x' (common/q8_dot.wgsl's dot16):
//   W . x = d sum_t sc_t (q_t . x_t - 32 sum(x_t)).
// Unit u of a row lies in block u / 4; with j = u % 4, h = j / 2 and l0 = 16 (j % 2) it holds
// weights 128h + 32t + l0 .. + 16. Every block starts on 16 bytes (groups of eight, common/
// quant_q6_k.wgsl), so the unit is four 16-byte loads through the includer's vec4<u32> view
// of the weights, `wv`, and the scale's word.

const UNIT: u32 = 64u;

struct UnitW {
    lq: vec4<u32>,  // ql at l0 .. l0 + 16 of the half's first 32 bytes: quarters 0 and 2
    hq: vec4<u32>,  // of its second 32 bytes: quarters 1 and 3
    top: vec4<u32>, // qh at l0 .. l0 + 16
    sc: vec4<f32>,  // d * sc_t
}

struct UnitX {
    q: array<X16, 4>,  // x' at quarter t's 16 weights
    d: vec4<f32>,      // quarter t's block unit (d / 254)
    sums: vec4<f32>,   // 32 sum(x_t)
}

fn unit_x(tok: u32, u: u32) -> UnitX {
    let j = u % 4u;
    let e = (u / 4u) * 16u + (j / 2u) * 8u + (j % 2u);
    let q = array<X16, 4>(x16(tok, e), x16(tok, e + 2u), x16(tok, e + 4u), x16(tok, e + 6u));
    let s = e / 2u;
    let d = vec4<f32>(x_d(tok, s), x_d(tok, s + 1u), x_d(tok, s + 2u), x_d(tok, s + 3u));
    let sums = vec4<f32>(x_sum(tok, e), x_sum(tok, e + 2u), x_sum(tok, e + 4u),
                         x_sum(tok, e + 6u));
    return UnitX(q, d, 32.0 * d * sums);
}

fn unit_w(b: u32, u: u32) -> UnitW {
    let blk = q6k_block(b);
    let run = blk.base / 4u;
    let j = u % 4u;
    let h = j / 2u;
    let l = j % 2u;
    // ql's runs 4h + l and 4h + l + 2, qh's run 8 + 2h + l, the scales' run 12: quarter t's
    // scale is sc[8h + l + 2t], bytes l and l + 2 of words 2h and 2h + 1 of that run.
    let sc = wv[run + 12u];
    let s0 = unpack_i8x4(select(sc.x, sc.z, h == 1u));
    let s1 = unpack_i8x4(select(sc.y, sc.w, h == 1u));
    return UnitW(wv[run + 4u * h + l], wv[run + 4u * h + l + 2u], wv[run + 8u + 2u * h + l],
                 blk.d * vec4<f32>(vec4<i32>(s0[l], s0[l + 2u], s1[l], s1[l + 2u])));
}

fn unit_dot_x(k: UnitW, xs: UnitX) -> f32 {
    let m4 = vec4<u32>(0x0f0f0f0fu);
    let m2 = vec4<u32>(0x03030303u);
    let four = vec4<u32>(4u);
    let dq = vec4<i32>(dot16((k.lq & m4) | ((k.top & m2) << four), xs.q[0]),
                       dot16((k.hq & m4) | (((k.top >> vec4<u32>(2u)) & m2) << four), xs.q[1]),
                       dot16(((k.lq >> four) & m4) | (((k.top >> four) & m2) << four), xs.q[2]),
                       dot16(((k.hq >> four) & m4) | (((k.top >> vec4<u32>(6u)) & m2) << four), xs.q[3]));
    return dot(k.sc * xs.d, vec4<f32>(dq)) - dot(k.sc, xs.sums);
}
