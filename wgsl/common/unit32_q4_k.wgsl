// Q4_K's twin of common/unit32.wgsl (read that first). Its unit is the decode's
// (common/unit_dot_q4_k.wgsl): the low nibbles of four consecutive quant words (16 weights of
// sub-block 2p) and their high nibbles (the same positions of sub-block 2p + 1), read as two
// 16-byte loads through the includer's vec4<u32> view `wv` (the block header, the unit's quants).
// Unit u of a row lies in block u / 8; with j = u % 8 and p = j / 2 it reads the block's 16-byte
// run 1 + j, weights 64p + 16 (j % 2) + 0..16 (low nibbles, half 0) and 32 more on (high, half 1).

fn unit32(rb: u32, u: u32) -> array<mat4x4<f32>, 2> {
    let b = rb + u / 8u;
    let j = u % 8u;
    let head = wv[b * 9u];
    let q = wv[b * 9u + 1u + j];
    let dm = unpack2x16float(head.x);
    let a = k4_scale_min_of(head.yzw, j & 6u);
    let c = k4_scale_min_of(head.yzw, (j & 6u) + 1u);
    let sa = dm.x * a.x;
    let ma = dm.y * a.y;
    let sc = dm.x * c.x;
    let mc = dm.y * c.y;
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
