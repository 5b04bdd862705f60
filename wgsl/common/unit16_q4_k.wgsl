// Q4_K's twin of common/unit16.wgsl (read that first). Its unit is the decode's
// (common/unit_dot_q4_k.wgsl): the low nibbles of two quant words (8 weights of sub-block 2p)
// and their high nibbles (the same positions of sub-block 2p + 1), so each quant word and the
// block header are loaded once per 16 weights. Unit u of a row lies in block u / 16; with p =
// (u % 16) / 4 and q = u % 4 it reads quant words 4 + 8p + 2q and the next of the block (layout
// in common/quant_q4_k.wgsl), weights 64p + 8q + 0..8 (low nibbles) and 64p + 32 + 8q + 0..8
// (high).

fn unit16(rb: u32, u: u32) -> mat4x4<f32> {
    let base = (rb + u / 16u) * 36u;
    let dm = unpack2x16float(w[base]);
    let p = (u % 16u) / 4u;
    let a = k4_scale_min(base + 1u, 2u * p);
    let c = k4_scale_min(base + 1u, 2u * p + 1u);
    let q = base + 4u + p * 8u + (u % 4u) * 2u;
    let w0 = w[q];
    let w1 = w[q + 1u];
    let sa = dm.x * a.x;
    let ma = dm.y * a.y;
    let sc = dm.x * c.x;
    let mc = dm.y * c.y;
    return mat4x4<f32>(
        vec4<f32>(unpack_nibbles(w0, 0u)) * sa - ma,
        vec4<f32>(unpack_nibbles(w1, 0u)) * sa - ma,
        vec4<f32>(unpack_nibbles(w0, 4u)) * sc - mc,
        vec4<f32>(unpack_nibbles(w1, 4u)) * sc - mc,
    );
}

fn unit16_x(u: u32) -> vec4<u32> {
    let i = (u / 16u) * 64u + ((u % 16u) / 4u) * 16u + (u % 4u) * 2u;
    return vec4<u32>(i, i + 1u, i + 8u, i + 9u);
}
