// The wide reading of a Q4_K unit of 32 weights (common/unit_dot_q4_k.wgsl, unit32_q4_k.wgsl):
// a 144-byte block is nine 16-byte runs, the header (d, dmin, the 12 scale bytes) and eight runs
// of quants; unit j (0..8) of block b is run 1 + j, the low nibbles of sub-block 2p and the high
// nibbles of sub-block 2p + 1 (p = j / 2). Two loads through the includer's vec4<u32> view of
// the weights, `wv`. Include-only.

struct Q4kUnit {
    q: vec4<u32>,
    scale: vec2<f32>,  // d * sc of the low nibbles' sub-block, of the high nibbles'
    min: vec2<f32>,    // dmin * m of the same
}

fn q4k_unit(b: u32, j: u32) -> Q4kUnit {
    let head = wv[b * 9u];
    let dm = unpack2x16float(head.x);
    let sm = k4_scale_min_pair(head.yzw, j / 2u);
    return Q4kUnit(wv[b * 9u + 1u + j], dm.x * sm.xy, dm.y * sm.zw);
}
