// BF16 weights: a "block" is 8 bfloat16 (4 words); each is the top half of an f32.

const QK: u32 = 8u;

fn bf16x2(v: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(v << 16u), bitcast<f32>(v & 0xffff0000u));
}

fn dequant8(b: u32, j: u32) -> array<vec4<f32>, 2> {
    let q = b * 4u;
    return array<vec4<f32>, 2>(
        vec4<f32>(bf16x2(w[q]), bf16x2(w[q + 1u])),
        vec4<f32>(bf16x2(w[q + 2u]), bf16x2(w[q + 3u])),
    );
}
