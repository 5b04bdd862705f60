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

// (scale 2p, scale 2p + 1, min 2p, min 2p + 1) of sub-blocks 2p and 2p + 1 (p: 0..3) from the same
// three words, without branches: each pair is one 16-bit half of the words (GGML's CUDA
// vec_dot_q4_K_q8_1 reads them so), about half the instructions of two k4_scale_min_of calls, which
// the decode units (common/q4_k_wide.wgsl) pay once per row and unit.
fn k4_scale_min_pair(sc: vec3<u32>, p: u32) -> vec4<f32> {
    let shift = (p & 1u) * 16u;
    let h0 = sc[0] >> shift;  // q[2p'], q[2p' + 1] with p' = p % 2
    let h1 = sc[1] >> shift;  // q[4 + 2p'], ...
    let h2 = sc[2] >> shift;  // q[8 + 2p'], ...
    let low = p < 2u;
    let s = select((h2 & 0x0f0fu) | ((h0 >> 2u) & 0x3030u), h0 & 0x3f3fu, low);
    let m = select(((h2 >> 4u) & 0x0f0fu) | ((h1 >> 2u) & 0x3030u), h1 & 0x3f3fu, low);
    let v = s | (m << 16u);
    return vec4<f32>((vec4<u32>(v) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xffu));
}

// The same from the block's scale words at `w[s0..s0 + 3]`.
fn k4_scale_min(s0: u32, s: u32) -> vec2<f32> {
    return k4_scale_min_of(vec3<u32>(w[s0], w[s0 + 1u], w[s0 + 2u]), s);
}
