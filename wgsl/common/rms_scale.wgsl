// tandem:include common/reduce.wgsl
//
// The RMSNorm prologue of the decode matvecs: 1 / sqrt(mean(x^2) + eps) over the kernel's
// `x: array<vec4<f32>>` of n_cols floats, reduced by the whole workgroup of WG threads (every
// thread must call it). Include-only.

fn rms_scale(inv: Invocation, n_cols: u32, eps: f32) -> f32 {
    var s = 0.0;
    for (var i = inv.lid; i < n_cols / 4u; i += WG) {
        let v = x[i];
        s += dot(v, v);
    }
    let r = inverseSqrt(row_sum(s, inv, WG) / f32(n_cols) + eps);
    workgroupBarrier();  // the kernel's own reduction reuses the workgroup memory
    return r;
}
