// The `narrow` twin of Q6_K's unit against int8 x' (common/unit_q8_q6_k.wgsl; the block layout
// is in common/quant_q6_k.wgsl): 32 weights, positions l0 .. l0 + 16 of half h of a block in its
// quarters p and p + 2, which share their quant bytes: 16 bytes of ql (quarter p in the low
// nibbles, p + 2 in the high) and 16 of qh (bits 2t .. 2t + 1 for quarter t, the other two
// quarters' bits serving the neighbouring unit, whose thread's load of the same 16 bytes a
// subgroup coalesces). A quarter's 6-bit quants, assembled in place as four unsigned bytes a
// word, are dotted with x' (common/q8_dot.wgsl's dot16):
//   W . x = d sum_t sc_t (q_t . x_t - 32 sum(x_t)).
// Unit u of a row lies in block u / 8; with j = u % 8, h = j / 4, l0 = 16 ((j / 2) % 2) and
// p = j % 2 it holds weights 128h + 32t + l0 .. + 16 for t = p, p + 2. A unit of 32 weights
// keeps the x' a thread holds for its rows to two halves of 16, as Q4_K's unit does: matvec_q8
// takes 80 registers with it, 100 with the 64-weight unit, which takes fewer instructions a
// weight and was faster alone (H100, dense 8B decode: 276.9 tok/s, 273.5 with this one). Every
// block starts on 16 bytes (groups of eight, common/quant_q6_k.wgsl), so the unit is three
// 16-byte loads through the includer's vec4<u32> view of the weights, `wv`.

const UNIT: u32 = 32u;

struct UnitW {
    q: vec4<u32>,   // ql at l0 .. l0 + 16 of the half's quarters p (low nibbles), p + 2 (high)
    top: vec4<u32>, // qh at l0 .. l0 + 16, shifted so quarter p's bits are 0 .. 1, p + 2's 4 .. 5
    sc: vec2<f32>,  // d * sc_t for t = p, p + 2
}

struct UnitX {
    q: array<X16, 2>,  // x' at quarters p and p + 2
    d: vec2<f32>,      // their block units (d / 254)
    sums: vec2<f32>,   // 32 sum(x_t)
}

fn unit_x(tok: u32, u: u32) -> UnitX {
    let j = u % 8u;
    let e = (u / 8u) * 16u + (j / 4u) * 8u + (j / 2u) % 2u + 2u * (j % 2u);
    let q = array<X16, 2>(x16(tok, e), x16(tok, e + 4u));
    let d = vec2<f32>(x_d(tok, e / 2u), x_d(tok, e / 2u + 2u));
    let sums = vec2<f32>(x_sum(tok, e), x_sum(tok, e + 4u));
    return UnitX(q, d, 32.0 * d * sums);
}

fn unit_w(b: u32, u: u32) -> UnitW {
    let blk = q6k_block(b);
    let run = blk.base / 4u;
    let j = u % 8u;
    let h = j / 4u;
    let l = (j / 2u) % 2u;
    let pq = j % 2u;
    // ql's run 4h + 2p + l, qh's run 8 + 2h + l, the scales' run 12: quarter t's scale is
    // sc[8h + l + 2t], byte l + 2p of words 2h (t = p) and 2h + 1 (t = p + 2) of that run.
    let sc = wv[run + 12u];
    let s0 = unpack_i8x4(select(sc.x, sc.z, h == 1u));
    let s1 = unpack_i8x4(select(sc.y, sc.w, h == 1u));
    let top = wv[run + 8u + 2u * h + l] >> vec4<u32>(2u * pq);
    return UnitW(wv[run + 4u * h + 2u * pq + l], top,
                 blk.d * vec2<f32>(vec2<i32>(s0[l + 2u * pq], s1[l + 2u * pq])));
}

fn unit_dot_x(k: UnitW, xs: UnitX) -> f32 {
    let m4 = vec4<u32>(0x0f0f0f0fu);
    let m2 = vec4<u32>(0x03030303u);
    let four = vec4<u32>(4u);
    let dq = vec2<i32>(dot16((k.q & m4) | ((k.top & m2) << four), xs.q[0]),
                       dot16(((k.q >> four) & m4) | (((k.top >> four) & m2) << four), xs.q[1]));
    return dot(k.sc * xs.d, vec2<f32>(dq)) - dot(k.sc, xs.sums);
}
