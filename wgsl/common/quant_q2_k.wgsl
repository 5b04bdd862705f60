// Q2_K: super-blocks of 256 2-bit quants in 16 groups of 16 with 4-bit scales and mins (84 bytes
// = 21 words): words 0..3 = scales[16] (scale low nibble, min high), words 4..19 = qs[64], word
// 20 = d | dmin << 16. Element 128 n + 32 s + 16 h + l (n = 0..1, s = 0..3, h = 0..1, l = 0..15)
// is bits 2s..2s+1 of qs[32 n + 16 h + l], in group i = 8n + 2s + h;
// x = d * sc[i] * q - dmin * m[i].

const QK: u32 = 256u;

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let base = b * 21u;
    let dm = unpack2x16float(w[base + 20u]);
    let n = j / 16u;
    let i = 8u * n + (j % 16u) / 2u; // the group of 16: 2s + h within the half
    let s = (j % 16u) / 4u;
    let sc = (w[base + i / 4u] >> ((i % 4u) * 8u)) & 0xffu;
    let dl = dm.x * f32(sc & 0xfu);
    let ml = dm.y * f32(sc >> 4u);
    let q = base + 4u + (32u * n + 16u * (i % 2u) + 8u * (j % 2u)) / 4u;
    let sh = vec4<u32>(2u * s);
    let three = vec4<u32>(3u);
    return array<vec4<f32>, 2>(
        vec4<f32>((unpack_u8x4(w[q]) >> sh) & three) * dl - ml,
        vec4<f32>((unpack_u8x4(w[q + 1u]) >> sh) & three) * dl - ml,
    );
}
