// IQ4_NL: blocks of 32 4-bit indices into 16 non-linear values, with one f16 scale (18 bytes),
// stored in pairs (9 words) like Q4_0: word 0 = the two scales, then each block's 16 bytes.
// Element i < 16 is the low nibble of byte i, element i >= 16 the high nibble of byte i - 16;
// x = d * KVALUES_IQ4NL[q].

const QK: u32 = 32u;

// GGML's kvalues_iq4nl.
const KVALUES_IQ4NL = array<f32, 16>(
    -127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0,
);

fn iq4nl_values(q: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(KVALUES_IQ4NL[q.x], KVALUES_IQ4NL[q.y], KVALUES_IQ4NL[q.z], KVALUES_IQ4NL[q.w]);
}

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let pair = (b >> 1u) * 9u;
    let d = f16_at(w[pair], b & 1u);
    let q = pair + 1u + (b & 1u) * 4u + (j & 1u) * 2u;
    let shift = (j >> 1u) * 4u;
    return array<vec4<f32>, 2>(
        iq4nl_values(unpack_nibbles(w[q], shift)) * d,
        iq4nl_values(unpack_nibbles(w[q + 1u], shift)) * d,
    );
}
