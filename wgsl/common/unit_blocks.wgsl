// unit_dot on a unit file's unit_x(u, xo) (x' at unit u, read once) and
// unit_w_dot(b, u, xs) (its dot product with the unit's weights in block b): common/unit_dot.wgsl
// and its twins include this. Include-only.

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
    return unit_w_dot(rb + u / (QK / UNIT), u, unit_x(u, xo));
}
