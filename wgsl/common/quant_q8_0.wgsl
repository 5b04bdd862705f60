// Q8_0: blocks of 32 int8 with one f16 scale (34 bytes), stored in pairs (17 words):
// word 0 = the two scales, words 1..8 = block 2p's quants, words 9..16 = block 2p+1's.

const QK: u32 = 32u;

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let pair = (b >> 1u) * 17u;
    let d = f16_at(w[pair], b & 1u);
    let q = pair + 1u + (b & 1u) * 8u + j * 2u;
    return array<vec4<f32>, 2>(vec4<f32>(unpack_i8x4(w[q])) * d, vec4<f32>(unpack_i8x4(w[q + 1u])) * d);
}
