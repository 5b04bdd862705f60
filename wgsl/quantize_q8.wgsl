// tandem:include common/step.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/q8_dot.wgsl
// tandem:subgroups
//
// x' = x, or RMSNorm(x) * norm_w (flags bit 0), of each row of the pass quantized to int8 blocks
// (common/q8_dot.wgsl) in common/q8_global.wgsl's layout, once for every small-batch matrix
// product that reads it (matvec_batch_q8.wgsl). With the norm it quantizes x * norm_w and keeps
// the row's scale s = 1 / sqrt(mean(x^2) + eps) beside it, which the products apply after their
// sums, as the decode kernels' norm prologue does (common/rms_fold.wgsl): a verification computes
// each token's products the way a decode step does. Workgroup (i, r) takes blocks 64 i .. + 64
// of row r, a block of 32 values a thread; with the norm, its threads first sum the whole row's
// squares by row_sum (common/reduce.wgsl or its `_sg` twin). Each group of four blocks' units
// (d / 254) and of four entries' sums is written as one vec4 by the group's first thread.

const WG: u32 = 64u;

struct Params {
    n_cols: u32,    // a multiple of 32
    eps: f32,
    flags: u32,     // bit 0: RMSNorm with norm_w
    rows_mode: u32, // 0: all tokens, 1: the output rows
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;         // [rows, n_cols]
@group(0) @binding(1) var<storage, read> norm_w: array<vec4<f32>>;    // [n_cols] or unused
@group(0) @binding(2) var<storage, read_write> xq: array<vec4<u32>>;  // [rows, q8_row_len]
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<uniform> step: Step;

var<workgroup> units: array<f32, WG>;
var<workgroup> sums: array<f32, 2u * WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, inv: Invocation) {
    let r = wg.y;
    if (r >= step_rows(step, p.rows_mode)) {
        return;
    }
    let cols4 = p.n_cols / 4u;
    let xi = r * cols4;
    let norm = (p.flags & 1u) != 0u;
    var scale = 1.0;
    if (norm) {
        var s = 0.0;
        for (var i = inv.lid; i < cols4; i += WG) {
            let v = x[xi + i];
            s += dot(v, v);
        }
        scale = inverseSqrt(row_sum(s, inv, WG) / f32(p.n_cols) + p.eps);
    }
    let n_blocks = p.n_cols / 32u;
    let sums_at = p.n_cols / 8u + (p.n_cols + 127u) / 128u;
    let scale_at = sums_at + (p.n_cols + 63u) / 64u;
    let row = r * (scale_at + 1u);
    if (wg.x == 0u && inv.lid == 0u) {
        xq[row + scale_at] = bitcast<vec4<u32>>(vec4<f32>(scale, 0.0, 0.0, 0.0));
    }
    let b = wg.x * WG + inv.lid;
    if (b < n_blocks) {
        var v: array<vec4<f32>, 8>;
        var amax = vec4<f32>(0.0);
        for (var k = 0u; k < 8u; k++) {
            let i = 8u * b + k;
            v[k] = x[xi + i];
            if (norm) {
                v[k] = v[k] * norm_w[i];
            }
            amax = max(amax, abs(v[k]));
        }
        let d = q8_scale(amax);
        let halves = quantize_block(v, d);
        xq[row + 4u * b] = halves[0].q;
        xq[row + 4u * b + 1u] = halves[0].r;
        xq[row + 4u * b + 2u] = halves[1].q;
        xq[row + 4u * b + 3u] = halves[1].r;
        units[inv.lid] = d / 254.0;
        sums[2u * inv.lid] = f32(sum16(halves[0]));
        sums[2u * inv.lid + 1u] = f32(sum16(halves[1]));
    }
    workgroupBarrier();
    if (b < n_blocks && b % 4u == 0u) {
        let j = inv.lid;
        let u = vec4<f32>(units[j], units[j + 1u], units[j + 2u], units[j + 3u]);
        xq[row + p.n_cols / 8u + b / 4u] = bitcast<vec4<u32>>(u);
    }
    if (b < n_blocks && b % 2u == 0u) {
        let j = 2u * inv.lid;
        let s = vec4<f32>(sums[j], sums[j + 1u], sums[j + 2u], sums[j + 3u]);
        xq[row + sums_at + b / 2u] = bitcast<vec4<u32>>(s);
    }
}
