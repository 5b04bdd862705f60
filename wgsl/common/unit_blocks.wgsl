// unit_dot and unit_dot2 on a unit file's unit_x(u, xo) (x' at unit u, read once) and
// unit_w_dot(b, u, xs) (its dot product with the unit's weights in block b): common/unit_dot.wgsl
// and its twins include this. Include-only.

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
    return unit_w_dot(rb + u / (QK / UNIT), u, unit_x(u, xo));
}

fn unit_dot2(gb: u32, ub: u32, u: u32, xo: u32) -> vec2<f32> {
    let xs = unit_x(u, xo);
    let b = u / (QK / UNIT);
    return vec2<f32>(unit_w_dot(gb + b, u, xs), unit_w_dot(ub + b, u, xs));
}
