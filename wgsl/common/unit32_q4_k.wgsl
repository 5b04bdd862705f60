// tandem:include common/q4_k_wide.wgsl
// Q4_K's twin of common/unit32.wgsl (read that first). Its unit is the decode's
// (common/unit_dot_q4_k.wgsl): the low nibbles of four consecutive quant words (16 weights of
// sub-block 2p) and their high nibbles (the same positions of sub-block 2p + 1), read as two
// 16-byte loads (common/q4_k_wide.wgsl).
// Unit u of a row lies in block u / 8; with j = u % 8 and p = j / 2 it reads the block's 16-byte
// run 1 + j, weights 64p + 16 (j % 2) + 0..16 (low nibbles, half 0) and 32 more on (high, half 1).

fn unit32(rb: u32, u: u32) -> array<mat4x4<f32>, 2> {
    let b = rb + u / 8u;
    let k = q4k_unit(b, u % 8u);
    let q = k.q;
    let sa = k.scale.x;
    let ma = k.min.x;
    let sc = k.scale.y;
    let mc = k.min.y;
    return array<mat4x4<f32>, 2>(
        mat4x4<f32>(vec4<f32>(unpack_nibbles(q.x, 0u)) * sa - ma,
                    vec4<f32>(unpack_nibbles(q.y, 0u)) * sa - ma,
                    vec4<f32>(unpack_nibbles(q.z, 0u)) * sa - ma,
                    vec4<f32>(unpack_nibbles(q.w, 0u)) * sa - ma),
        mat4x4<f32>(vec4<f32>(unpack_nibbles(q.x, 4u)) * sc - mc,
                    vec4<f32>(unpack_nibbles(q.y, 4u)) * sc - mc,
                    vec4<f32>(unpack_nibbles(q.z, 4u)) * sc - mc,
                    vec4<f32>(unpack_nibbles(q.w, 4u)) * sc - mc));
}

fn unit32_x(u: u32, h: u32) -> vec4<u32> {
    let j = u % 8u;
    let i = (u / 8u) * 64u + (j / 2u) * 16u + (j % 2u) * 4u + 8u * h;
    return vec4<u32>(i, i + 1u, i + 2u, i + 3u);
}
