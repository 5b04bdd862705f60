// tandem:include common/bits.wgsl
// tandem:include common/mat_io.wgsl
// tandem:include common/rms_fold.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/unit_dot.wgsl
// tandem:per-qtype
// tandem:subgroups
//
// y[y_offset + r] (+)= sum_k W[r, k] * x'[k] (+ bias[y_offset + r]) for one token: the decode
// matrix-vector product, reading the weights in their quantized blocks. With the norm prologue
// (flags bit 2), x' = RMSNorm(x) * norm_w, folded into the row pass (common/rms_fold.wgsl), which
// saves the separate norm dispatch; otherwise x' = x.
// Work split: each workgroup takes ROWS rows; the WG / ROWS threads of a row stride over its
// units (unit_dot, common/unit_dot.wgsl or the type's twin) and reduce their partial sums, with
// the prologue's sum of x^2, by row_sum4 (common/reduce.wgsl: a tree in workgroup memory; in the
// `_sg` variants, subgroupAdd and one step across subgroups).
// Workgroups are laid out 2-D (x up to 65535) so a 262k-row vocabulary fits.

override WG: u32 = 256u;
override ROWS: u32 = 4u;  // a power of two; set per adapter by kernels::matvec_rows

@group(0) @binding(6) var<storage, read> norm_w: array<vec4<f32>>;  // [n_cols] or unused

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let threads = WG / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row = (wg.x + wg.y * nwg.x) * ROWS + slot;
    var acc = 0.0;
    if (row < p.n_rows) {
        let rb = row * (p.n_cols / QK);
        for (var u = lane; u < p.n_cols / UNIT; u += threads) {
            acc += unit_dot(rb, u, 0u);
        }
    }
    // The dot product and, with the prologue, the sum of x^2 (common/rms_fold.wgsl).
    let sum = row_sum4(vec4<f32>(acc, x_ss, 0.0, 0.0), inv, threads);
    if (lane == 0u && row < p.n_rows) {
        var r = sum.x * rms_fold_scale(sum.y, p.n_cols, p.eps);
        if ((p.flags & 1u) != 0u) {
            r += bias[p.y_offset + row];
        }
        let o = p.y_offset + row;
        if ((p.flags & 2u) != 0u) {
            r += y[o];
        }
        y[o] = r;
    }
}
