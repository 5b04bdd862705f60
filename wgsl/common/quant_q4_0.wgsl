// Q4_0: blocks of 32 4-bit quants with one f16 scale (18 bytes), stored in pairs (9 words):
// word 0 = the two scales, then each block's 16 bytes. Element i < 16 is the low nibble of
// byte i, element i >= 16 the high nibble of byte i - 16; x = d * (q - 8).

const QK: u32 = 32u;

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let pair = (b >> 1u) * 9u;
    let d = f16_at(w[pair], b & 1u);
    let q = pair + 1u + (b & 1u) * 4u + (j & 1u) * 2u;
    let shift = (j >> 1u) * 4u;
    return array<vec4<f32>, 2>(
        (vec4<f32>(unpack_nibbles(w[q], shift)) - 8.0) * d,
        (vec4<f32>(unpack_nibbles(w[q + 1u], shift)) - 8.0) * d,
    );
}
