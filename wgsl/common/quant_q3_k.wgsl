// Q3_K: super-blocks of 256 3-bit quants in 16 groups of 16 with 6-bit scales (110 bytes), stored
// in pairs (55 words): word 0 = the two f16 scales d, then per block 27 words: hmask[32] (words
// 0..7), qs[64] (8..23), scales[12] (24..26). Element 128 n + 32 s + 16 h + l (n = 0..1,
// s = 0..3, h = 0..1, l = 0..15) has low bits 2s..2s+1 of qs[32 n + 16 h + l], high bit 4n + s of
// hmask[16 h + l] (set: q, clear: q - 4), scale sc[i] of group i = 8n + 2s + h, whose low 4 bits
// are nibble i / 8 of scales[i % 8] and high 2 bits bits 2 (i / 4) .. of scales[8 + i % 4];
// x = d * (sc - 32) * q.

const QK: u32 = 256u;

fn q3k_byte(w0: u32, i: u32) -> u32 {
    return (w[w0 + i / 4u] >> ((i % 4u) * 8u)) & 0xffu;
}

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let pair = (b >> 1u) * 55u;
    let d = f16_at(w[pair], b & 1u);
    let base = pair + 1u + (b & 1u) * 27u;
    let n = j / 16u;
    let i = 8u * n + (j % 16u) / 2u; // the group of 16: 2s + h within the half
    let s = (j % 16u) / 4u;
    let k = 16u * (i % 2u) + 8u * (j % 2u); // byte of the half's 32 (qs) or of hmask
    let lo = (q3k_byte(base + 24u, i % 8u) >> (4u * (i / 8u))) & 0xfu;
    let hi = (q3k_byte(base + 24u, 8u + i % 4u) >> (2u * (i / 4u))) & 3u;
    let dl = d * f32(i32(lo | (hi << 4u)) - 32);
    let qs = base + 8u + (32u * n + k) / 4u;
    let hm = base + k / 4u;
    let ls = vec4<u32>(2u * s);
    let hs = vec4<u32>(4u * n + s);
    let three = vec4<u32>(3u);
    let one = vec4<u32>(1u);
    let q0 = vec4<i32>((unpack_u8x4(w[qs]) >> ls) & three) + vec4<i32>(((unpack_u8x4(w[hm]) >> hs) & one) * 4u) - 4;
    let q1 = vec4<i32>((unpack_u8x4(w[qs + 1u]) >> ls) & three) + vec4<i32>(((unpack_u8x4(w[hm + 1u]) >> hs) & one) * 4u) - 4;
    return array<vec4<f32>, 2>(vec4<f32>(q0) * dl, vec4<f32>(q1) * dl);
}
