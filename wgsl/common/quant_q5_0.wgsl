// Q5_0: blocks of 32 5-bit quants with one f16 scale (22 bytes), stored in pairs (11 words):
// word 0 = the two scales, then per block the 32 high bits qh (1 word) and 16 bytes of low
// nibbles as in Q4_0. Element e's high bit is bit e of qh; x = d * (q - 16).

const QK: u32 = 32u;

// The fifth bits of elements e..e+3 (bits e..e+3 of qh), shifted into place.
fn q5_high(qh: u32, e: u32) -> vec4<u32> {
    return ((vec4<u32>(qh) >> (vec4<u32>(e) + vec4<u32>(0u, 1u, 2u, 3u))) & vec4<u32>(1u)) << vec4<u32>(4u);
}

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let pair = (b >> 1u) * 11u;
    let d = f16_at(w[pair], b & 1u);
    let base = pair + 1u + (b & 1u) * 5u;
    let qh = w[base];
    let q = base + 1u + (j & 1u) * 2u;
    let shift = (j >> 1u) * 4u;
    let e = j * 8u;
    return array<vec4<f32>, 2>(
        (vec4<f32>(unpack_nibbles(w[q], shift) | q5_high(qh, e)) - 16.0) * d,
        (vec4<f32>(unpack_nibbles(w[q + 1u], shift) | q5_high(qh, e + 4u)) - 16.0) * d,
    );
}
