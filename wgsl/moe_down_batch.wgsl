// tandem:include common/bits.wgsl
// tandem:include common/gemm_tile.wgsl
// tandem:include common/moe_down_batch_io.wgsl
// tandem:per-qtype
//
// o[s, r] = weight_s * (D_e[r, :] . h[s, :]) for every route slot s = t * k + j of a batched pass,
// e = route[s].id: the batched form of moe_down.wgsl, reading each selected expert's weights once
// per pass. The sum over a token's k slots and the residual add follow in moe_combine.wgsl (a
// fixed order, no float atomics).
// Weight layout: ffn_down_exps as stored, [n_exp, n_rows, n_cols].
// Work split: a workgroup per (64-row tile, expert of this chunk): grid [n_rows / 64, n_exp];
// experts with no tokens exit at once. For each tile of 64 of the expert's slots, each k step of
// 32 stages a 64x32 weight tile and the 64 gathered h rows in workgroup memory, k-major (16 KiB,
// common/gemm_tile.wgsl); each of the 256 threads accumulates 4 rows x 4 slots in four vec4
// registers, skipping the FMAs where its slots are past the expert's; the next k step's
// weights and h are loaded into registers while the current tiles are multiplied.

@group(0) @binding(1) var<storage, read> h: array<vec4<f32>>;        // [n_tokens * k, n_cols]

const TM: u32 = 64u;
const TN: u32 = 64u;
const TK: u32 = 32u;

var<workgroup> ws: array<vec4<f32>, 512>;  // [TK][TM / 4], swizzled
var<workgroup> xs: array<vec4<f32>, 512>;  // [TK][TN / 4], swizzled; its first vec4 also passes
                                           // the expert's list (first, count) to every thread

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let e = p.e0 + wg.y;
    if (lid == 0u) {
        xs[0] = vec4<f32>(bitcast<f32>(lists[e]), bitcast<f32>(lists[e + 1u] - lists[e]), 0.0, 0.0);
    }
    let fc = workgroupUniformLoad(&xs[0]);
    let count = bitcast<u32>(fc.y);
    if (count == 0u) {
        return;
    }
    let first = bitcast<u32>(fc.x);
    workgroupBarrier();  // every thread has read xs[0] before the staging overwrites it
    let head = p.n_expert + 1u;
    let row0 = wg.x * TM;
    let bpr = p.n_cols / QK;
    let cols4 = p.n_cols / 4u;
    // This thread's outputs: rows 4 tr .. 4 tr + 3, slots 4 tt .. 4 tt + 3 of the tile.
    let tr = lid % 16u;
    let tt = lid / 16u;
    // Staging: weight row wr, unit wu; h vec4 xc of slots xt and xt + 32.
    let wr = lid / 4u;
    let wu = lid % 4u;
    let w_ok = row0 + wr < p.n_rows;
    let wb = (wg.y * p.n_rows + row0 + wr) * bpr;
    let xt = lid / 8u;
    let xc = lid % 8u;
    for (var t0 = 0u; t0 < count; t0 += TN) {
        var xo0 = 0xffffffffu;
        var xo1 = 0xffffffffu;
        if (t0 + xt < count) {
            xo0 = lists[head + first + t0 + xt] * cols4 + xc;
        }
        if (t0 + xt + 32u < count) {
            xo1 = lists[head + first + t0 + xt + 32u] * cols4 + xc;
        }
        let live = t0 + tt * 4u < count;
        var acc0 = vec4<f32>(0.0);
        var acc1 = vec4<f32>(0.0);
        var acc2 = vec4<f32>(0.0);
        var acc3 = vec4<f32>(0.0);
        var wv0 = vec4<f32>(0.0);
        var wv1 = vec4<f32>(0.0);
        var xv0 = vec4<f32>(0.0);
        var xv1 = vec4<f32>(0.0);
        if (w_ok) {
            let v = dequant8(wb + (wu * 8u) / QK, ((wu * 8u) % QK) / 8u);
            wv0 = v[0];
            wv1 = v[1];
        }
        if (xo0 != 0xffffffffu) {
            xv0 = h[xo0];
        }
        if (xo1 != 0xffffffffu) {
            xv1 = h[xo1];
        }
        for (var k0 = 0u; k0 < p.n_cols; k0 += TK) {
            stage_w8(wr / 4u, wr % 4u, wu, wv0, wv1);
            stage_x4(xt, xc, xv0);
            stage_x4(xt + 32u, xc, xv1);
            workgroupBarrier();
            let kn = k0 + TK;
            if (kn < p.n_cols) {
                if (w_ok) {
                    let k = kn + wu * 8u;
                    let v = dequant8(wb + k / QK, (k % QK) / 8u);
                    wv0 = v[0];
                    wv1 = v[1];
                }
                if (xo0 != 0xffffffffu) {
                    xv0 = h[xo0 + kn / 4u];
                }
                if (xo1 != 0xffffffffu) {
                    xv1 = h[xo1 + kn / 4u];
                }
            }
            if (live) {
                for (var kk = 0u; kk < TK; kk++) {
                    let a = ws[slot(kk, tr)];
                    let b = xs[slot(kk, tt)];
                    acc0 = fma(a, vec4<f32>(b.x), acc0);
                    acc1 = fma(a, vec4<f32>(b.y), acc1);
                    acc2 = fma(a, vec4<f32>(b.z), acc2);
                    acc3 = fma(a, vec4<f32>(b.w), acc3);
                }
            }
            workgroupBarrier();
        }
        let j0 = t0 + tt * 4u;
        let r0 = row0 + tr * 4u;
        store4(j0, r0, acc0, count, first, head);
        store4(j0 + 1u, r0, acc1, count, first, head);
        store4(j0 + 2u, r0, acc2, count, first, head);
        store4(j0 + 3u, r0, acc3, count, first, head);
    }
}

// o[s, r0 .. r0 + 3] = weight_s * v for the expert's slot number j (if it has one), s its
// route slot; rows past the matrix are skipped.
fn store4(j: u32, r0: u32, v: vec4<f32>, count: u32, first: u32, head: u32) {
    if (j >= count) {
        return;
    }
    let s = lists[head + first + j];
    let wt = bitcast<f32>(route[s * 2u + 1u]);
    for (var i = 0u; i < 4u; i++) {
        let r = r0 + i;
        if (r >= p.n_rows) {
            return;
        }
        o[s * p.n_rows + r] = wt * v[i];
    }
}
