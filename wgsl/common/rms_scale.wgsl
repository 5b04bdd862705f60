// The RMSNorm prologue of the decode matvecs: 1 / sqrt(mean(x^2) + eps) over the kernel's
// `x: array<vec4<f32>>` of n_cols floats, reduced by the whole workgroup of WG threads (every
// thread must call it). Include-only.

var<workgroup> rms_red: array<f32, WG>;

fn rms_scale(lid: u32, n_cols: u32, eps: f32) -> f32 {
    var s = 0.0;
    for (var i = lid; i < n_cols / 4u; i += WG) {
        let v = x[i];
        s += dot(v, v);
    }
    rms_red[lid] = s;
    workgroupBarrier();
    for (var k = WG / 2u; k > 0u; k >>= 1u) {
        if (lid < k) {
            rms_red[lid] += rms_red[lid + k];
        }
        workgroupBarrier();
    }
    let r = inverseSqrt(rms_red[0] / f32(n_cols) + eps);
    workgroupBarrier();
    return r;
}
