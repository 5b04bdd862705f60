// unit_dot and unit_dot2 (common/unit_dot.wgsl) for a type whose twin of that file gives a unit's
// x' once (unit_x(u, xo)) and its dot product with one block's weights (unit_w_dot(b, u, xs)),
// so the gate and up rows of unit_dot2 share the x' reads. Include-only (from such a twin).

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
    return unit_w_dot(rb + u / (QK / UNIT), u, unit_x(u, xo));
}

fn unit_dot2(gb: u32, ub: u32, u: u32, xo: u32) -> vec2<f32> {
    let xs = unit_x(u, xo);
    let b = u / (QK / UNIT);
    return vec2<f32>(unit_w_dot(gb + b, u, xs), unit_w_dot(ub + b, u, xs));
}
