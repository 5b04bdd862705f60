// Q6_K: super-blocks of 256 6-bit quants (210 bytes), stored in groups of eight (420 words =
// 105 runs of 16 bytes): words 0..3 = the eight f16 scales d, then per block 52 words (13 runs,
// so every block starts on 16 bytes): ql[128] (words 0..31), qh[64] (32..47) and 16 int8
// sub-block scales (48..51). Element 128 h + 32 t + l (t = 0..3, l = 0..31) has low bits in
// ql[64 h + 32 (t & 1) + l] (nibble t / 2), high bits 2t..2t+1 of qh[32 h + l], scale
// sc[8 h + l / 16 + 2 t]; x = d * sc * (q - 32).

const QK: u32 = 256u;

// Block b's scale and the word where its 52 words start (a multiple of 4: the 16-byte run
// (base / 4) of a vec4<u32> view).
struct Q6kBlock {
    d: f32,
    base: u32,
}

fn q6k_block(b: u32) -> Q6kBlock {
    let group = (b / 8u) * 420u;
    let i = b % 8u;
    return Q6kBlock(f16_at(w[group + i / 2u], i & 1u), group + 4u + i * 52u);
}

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let blk = q6k_block(b);
    let d = blk.d;
    let base = blk.base;
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
