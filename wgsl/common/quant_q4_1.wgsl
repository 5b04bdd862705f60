// Q4_1: blocks of 32 4-bit quants with f16 scale d and min m (20 bytes = 5 words):
// word 0 = d | m << 16, words 1..4 = 16 bytes; element i < 16 is the low nibble of byte i,
// element i >= 16 the high nibble of byte i - 16. x = d * q + m.

const QK: u32 = 32u;

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let base = b * 5u;
    let dm = unpack2x16float(w[base]);
    let q = base + 1u + (j & 1u) * 2u;
    let shift = (j >> 1u) * 4u;
    return array<vec4<f32>, 2>(
        vec4<f32>(unpack_nibbles(w[q], shift)) * dm.x + dm.y,
        vec4<f32>(unpack_nibbles(w[q + 1u], shift)) * dm.x + dm.y,
    );
}
