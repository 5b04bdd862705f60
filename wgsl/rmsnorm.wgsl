// tandem:include common/step.wgsl
// tandem:include common/reduce.wgsl
// tandem:subgroups
//
// y[r, :] (+)= x[in_row0 + r, :] / sqrt(mean(x^2) + eps) * weight for each row r: RMSNorm, with
// an optional accumulate into y (Gemma's post-norms add into the residual stream), an input
// offset that picks the output rows (the final norm before the logits), and rows of y wider than
// dim written from a column on (the MTP head concatenates two norms: [enorm(e) | hnorm(h)]).
// One workgroup per row; its 256 threads sum the squares with row_sum (common/reduce.wgsl, or
// its subgroup twin in the `_sg` variant).

const WG: u32 = 256u;

struct Params {
    dim: u32,
    eps: f32,
    flags: u32,     // bit 0: accumulate into y; bit 1: read from row out_row0 on (output rows)
    rows_mode: u32, // 0: all tokens, 1: the output rows
    y_stride: u32,  // elements in a row of y (dim, or more)
    y_col0: u32,    // the column of y row r that element 0 goes to
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;          // [rows, dim]
@group(0) @binding(1) var<storage, read> weight: array<f32>;     // [dim]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;    // [rows, y_stride]
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<uniform> step: Step;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, inv: Invocation) {
    let r = wg.x;
    if (r >= step_rows(step, p.rows_mode)) {
        return;
    }
    let in_row = r + select(0u, step.out_row0, (p.flags & 2u) != 0u);
    let xi = in_row * p.dim;
    var s = 0.0;
    for (var i = inv.lid; i < p.dim; i += WG) {
        let v = x[xi + i];
        s += v * v;
    }
    let scale = inverseSqrt(row_sum(s, inv, WG) / f32(p.dim) + p.eps);
    let yi = r * p.y_stride + p.y_col0;
    let acc = (p.flags & 1u) != 0u;
    for (var i = inv.lid; i < p.dim; i += WG) {
        let v = x[xi + i] * scale * weight[i];
        if (acc) {
            y[yi + i] += v;
        } else {
            y[yi + i] = v;
        }
    }
}
