// The 6-bit sub-block scales and mins of Q4_K and Q5_K (GGML's get_scale_min_k4), from the 12
// scale bytes at words s0..s0+2 of the block. Include-only.

fn k4_byte(s0: u32, i: u32) -> u32 {
    return (w[s0 + i / 4u] >> ((i % 4u) * 8u)) & 0xffu;
}

// (scale, min) of sub-block `s` (0..7).
fn k4_scale_min(s0: u32, s: u32) -> vec2<f32> {
    if (s < 4u) {
        return vec2<f32>(f32(k4_byte(s0, s) & 63u), f32(k4_byte(s0, s + 4u) & 63u));
    }
    let hi = k4_byte(s0, s + 4u);
    let sc = (hi & 0xfu) | ((k4_byte(s0, s - 4u) >> 6u) << 4u);
    let m = (hi >> 4u) | ((k4_byte(s0, s) >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(m));
}
