// Q5_1: blocks of 32 5-bit quants with f16 scale d and min m (24 bytes = 6 words): word 0 =
// d | m << 16, word 1 = the high bits qh, words 2..5 = the low nibbles as in Q4_1.
// x = d * q + m.

const QK: u32 = 32u;

fn q5_high(qh: u32, e: u32) -> vec4<u32> {
    return ((vec4<u32>(qh) >> (vec4<u32>(e) + vec4<u32>(0u, 1u, 2u, 3u))) & vec4<u32>(1u)) << vec4<u32>(4u);
}

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let base = b * 6u;
    let dm = unpack2x16float(w[base]);
    let qh = w[base + 1u];
    let q = base + 2u + (j & 1u) * 2u;
    let shift = (j >> 1u) * 4u;
    let e = j * 8u;
    return array<vec4<f32>, 2>(
        vec4<f32>(unpack_nibbles(w[q], shift) | q5_high(qh, e)) * dm.x + dm.y,
        vec4<f32>(unpack_nibbles(w[q + 1u], shift) | q5_high(qh, e + 4u)) * dm.x + dm.y,
    );
}
