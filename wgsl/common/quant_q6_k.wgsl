// Q6_K: super-blocks of 256 6-bit quants (210 bytes), stored in pairs (105 words): word 0 = the
// two f16 scales d, then per block 52 words: ql[128] (words 0..31), qh[64] (32..47) and 16 int8
// sub-block scales (48..51). Element 128 h + 32 t + l (t = 0..3, l = 0..31) has low bits in
// ql[64 h + 32 (t & 1) + l] (nibble t / 2), high bits 2t..2t+1 of qh[32 h + l], scale
// sc[8 h + l / 16 + 2 t]; x = d * sc * (q - 32).

const QK: u32 = 256u;

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let pair = (b >> 1u) * 105u;
    let d = f16_at(w[pair], b & 1u);
    let base = pair + 1u + (b & 1u) * 52u;
    let h = j / 16u;
    let t = (j % 16u) / 4u;
    let l = (j % 4u) * 8u;
    let si = 8u * h + l / 16u + 2u * t;
    let sc = f32(unpack_i8x4(w[base + 48u + si / 4u])[si % 4u]) * d;
    let ql = base + (64u * h + 32u * (t & 1u) + l) / 4u;
    let qh = base + 32u + (32u * h + l) / 4u;
    let shift = (t / 2u) * 4u;
    let hs = vec4<u32>(2u * t);
    let q0 = unpack_nibbles(w[ql], shift) | (((unpack_u8x4(w[qh]) >> hs) & vec4<u32>(3u)) << vec4<u32>(4u));
    let q1 = unpack_nibbles(w[ql + 1u], shift) | (((unpack_u8x4(w[qh + 1u]) >> hs) & vec4<u32>(3u)) << vec4<u32>(4u));
    return array<vec4<f32>, 2>((vec4<f32>(q0) - 32.0) * sc, (vec4<f32>(q1) - 32.0) * sc);
}
