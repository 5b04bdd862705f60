// F16 weights: a "block" is 8 halves (4 words), decoded with unpack2x16float (no shader-f16).

const QK: u32 = 8u;

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let q = b * 4u;
    return array<vec4<f32>, 2>(
        vec4<f32>(unpack2x16float(w[q]), unpack2x16float(w[q + 1u])),
        vec4<f32>(unpack2x16float(w[q + 2u]), unpack2x16float(w[q + 3u])),
    );
}
