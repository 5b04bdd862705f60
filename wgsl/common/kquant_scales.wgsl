// The 6-bit sub-block scales and mins of Q4_K and Q5_K (GGML's get_scale_min_k4), from the 12
// scale bytes at words s0..s0+2 of the block. Include-only.

// (scale, min) of sub-block s (0..7) from the 12 scale bytes q as three words (GGML's
// get_scale_min_k4): q[s] and q[s + 4] are in words s / 4 and s / 4 + 1, q[s - 4] in word 0.
// The wide units (common/unit_dot_q4_k.wgsl, unit32_q4_k.wgsl) pass the words of their 16-byte
// header load.
fn k4_scale_min_of(sc: vec3<u32>, s: u32) -> vec2<f32> {
    let shift = (s % 4u) * 8u;
    let a = (sc[s / 4u] >> shift) & 0xffu;       // q[s]
    let b = (sc[s / 4u + 1u] >> shift) & 0xffu;  // q[s + 4]
    if (s < 4u) {
        return vec2<f32>(f32(a & 63u), f32(b & 63u));
    }
    let c = (sc[0u] >> shift) & 0xffu;           // q[s - 4]
    return vec2<f32>(f32((b & 0xfu) | ((c >> 6u) << 4u)), f32((b >> 4u) | ((a >> 6u) << 4u)));
}

// The same from the block's scale words at `w[s0..s0 + 3]`.
fn k4_scale_min(s0: u32, s: u32) -> vec2<f32> {
    return k4_scale_min_of(vec3<u32>(w[s0], w[s0 + 1u], w[s0 + 2u]), s);
}
