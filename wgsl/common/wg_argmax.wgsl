// Workgroup argmax for kernels of 256 threads: every thread offers (value, id) and gets back the
// largest value's (value bits, id), the lowest id winning ties. Include-only.

var<workgroup> argmax_v: array<f32, 256>;
var<workgroup> argmax_i: array<u32, 256>;

fn wg_argmax(v: f32, i: u32, lid: u32) -> vec2<u32> {
    argmax_v[lid] = v;
    argmax_i[lid] = i;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (lid < s) {
            let ov = argmax_v[lid + s];
            let oi = argmax_i[lid + s];
            if (ov > argmax_v[lid] || (ov == argmax_v[lid] && oi < argmax_i[lid])) {
                argmax_v[lid] = ov;
                argmax_i[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    let r = vec2<u32>(bitcast<u32>(argmax_v[0]), argmax_i[0]);
    workgroupBarrier();
    return r;
}
