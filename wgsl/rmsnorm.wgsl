// tandem:include common/step.wgsl
//
// y[r, :] (+)= x[in_row0 + r, :] / sqrt(mean(x^2) + eps) * weight for each row r: RMSNorm, with
// an optional accumulate into y (Gemma's post-norms add into the residual stream) and an input
// offset that picks the output rows (the final norm before the logits).
// One workgroup per row; 256 threads reduce the sum of squares in workgroup memory.

struct Params {
    dim: u32,
    eps: f32,
    flags: u32,     // bit 0: accumulate into y; bit 1: read from row out_row0 on (output rows)
    rows_mode: u32, // 0: all tokens, 1: the output rows
}

@group(0) @binding(0) var<storage, read> x: array<f32>;          // [rows, dim]
@group(0) @binding(1) var<storage, read> weight: array<f32>;     // [dim]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;    // [rows, dim]
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<uniform> step: Step;

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = wg.x;
    if (r >= step_rows(step, p.rows_mode)) {
        return;
    }
    let in_row = r + select(0u, step.out_row0, (p.flags & 2u) != 0u);
    let xi = in_row * p.dim;
    var s = 0.0;
    for (var i = lid; i < p.dim; i += 256u) {
        let v = x[xi + i];
        s += v * v;
    }
    partial[lid] = s;
    workgroupBarrier();
    for (var k = 128u; k > 0u; k >>= 1u) {
        if (lid < k) {
            partial[lid] += partial[lid + k];
        }
        workgroupBarrier();
    }
    let inv = inverseSqrt(partial[0] / f32(p.dim) + p.eps);
    let yi = r * p.dim;
    let acc = (p.flags & 1u) != 0u;
    for (var i = lid; i < p.dim; i += 256u) {
        let v = x[xi + i] * inv * weight[i];
        if (acc) {
            y[yi + i] += v;
        } else {
            y[yi + i] = v;
        }
    }
}
