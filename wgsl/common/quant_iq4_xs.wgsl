// IQ4_XS: super-blocks of 256 4-bit indices into 16 non-linear values, in 8 sub-blocks of 32 with
// 6-bit scales (136 bytes = 34 words): word 0 = d | scales_h << 16, word 1 = scales_l[4], words
// 2..33 = qs[128]. Sub-block s reads qs[16 s .. 16 s + 16], low nibbles for its first 16
// elements, high for the next 16; its scale ls = nibble s of scales_l (bits 4s..) | bits 2s..2s+1
// of scales_h << 4; x = d * (ls - 32) * KVALUES_IQ4NL[q].

const QK: u32 = 256u;

// GGML's kvalues_iq4nl.
const KVALUES_IQ4NL = array<f32, 16>(
    -127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0,
);

fn iq4nl_values(q: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(KVALUES_IQ4NL[q.x], KVALUES_IQ4NL[q.y], KVALUES_IQ4NL[q.z], KVALUES_IQ4NL[q.w]);
}

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let base = b * 34u;
    let d = unpack2x16float(w[base]).x;
    let s = j / 4u;
    let ls = ((w[base + 1u] >> (4u * s)) & 0xfu) | (((w[base] >> (16u + 2u * s)) & 3u) << 4u);
    let dl = d * f32(i32(ls) - 32);
    let q = base + 2u + 4u * s + 2u * (j % 2u);
    let shift = ((j % 4u) / 2u) * 4u;
    return array<vec4<f32>, 2>(
        iq4nl_values(unpack_nibbles(w[q], shift)) * dl,
        iq4nl_values(unpack_nibbles(w[q + 1u], shift)) * dl,
    );
}
