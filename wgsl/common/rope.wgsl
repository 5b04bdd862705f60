// Rotary position embedding of one element, shared by rope_store.wgsl and the decode prologue of
// attention.wgsl. Include-only. Element i < n_rot of a head pairs with another: in GGML's normal
// mode (0) i and i ^ 1 (pair j = i / 2), in NeoX mode (1) i and i +- n_rot / 2 (pair j = i mod
// n_rot / 2); pair j turns by pos * freq_scale * theta_base^(-2j / n_rot), the angle reduced to
// [-pi, pi] before cos/sin (the range where WGSL bounds their error, by 2^-11). Elements from n_rot on are left as they are.

// The element that element i < n_rot pairs with.
fn rope_partner(i: u32, n_rot: u32, mode: u32) -> u32 {
    if (mode == 0u) {
        return i ^ 1u;
    }
    let half = n_rot / 2u;
    return select(i - half, i + half, i < half);
}

// Element i of the rotated head, from its value x and its partner's value other.
// log2_theta = log2(theta_base).
fn rope_apply(x: f32, other: f32, i: u32, pos: u32, n_rot: u32, mode: u32, log2_theta: f32,
              freq_scale: f32) -> f32 {
    if (i >= n_rot) {
        return x;
    }
    let half = n_rot / 2u;
    var j: u32;
    var first: bool;
    if (mode == 0u) {
        j = i / 2u;
        first = (i % 2u) == 0u;
    } else {
        j = i % half;
        first = i < half;
    }
    let inv_freq = exp2(-2.0 * f32(j) / f32(n_rot) * log2_theta);
    var angle = f32(pos) * freq_scale * inv_freq;
    angle = angle - 6.283185307179586 * round(angle / 6.283185307179586);
    let c = cos(angle);
    let s = sin(angle);
    return select(other * s + x * c, x * c - other * s, first);
}
