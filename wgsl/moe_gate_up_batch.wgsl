// tandem:include common/bits.wgsl
// tandem:include common/gemm_tile.wgsl
// tandem:include common/act.wgsl
// tandem:include common/moe_gate_up_batch_io.wgsl
// tandem:per-qtype
//
// h[s, r] = act(G_e[r, :] . x[t, :]) * (U_e[r, :] . x[t, :]) for every route slot s = t * k + j
// of a batched pass (2..16 verification tokens, prefill), e = route[s].id: the batched form of
// moe_gate_up.wgsl that reads each selected expert's weights once per pass, not once per token.
// The token lists per expert come from moe_sort.wgsl. x is already normalised.
// Weight layout: as moe_gate_up.wgsl, per expert n_ff gate rows then n_ff up rows.
// Work split: a workgroup per (32-row tile, expert of this chunk): grid [n_ff / 32, n_exp];
// experts with no tokens exit at once. For each tile of 64 of the expert's tokens, each k step
// of 32 stages 32 gate + 32 up rows (dequantized, one unit of 8 a thread) and the 64 gathered
// token rows in workgroup memory, k-major (16 KiB, common/gemm_tile.wgsl), gate rows 2i, 2i + 1
// and up rows 2i, 2i + 1 sharing vec4 group i; each of the 256 threads accumulates 2 rows (gate
// and up) x 4 tokens in four vec4 registers, skipping the FMAs where its tokens are past the
// expert's; the next k step's weights and x are loaded into registers while the current tiles
// are multiplied.

@group(0) @binding(2) var<storage, read_write> h: array<f32>;        // [n_tokens * k, n_ff]

const TM: u32 = 32u;
const TN: u32 = 64u;
const TK: u32 = 32u;

var<workgroup> ws: array<vec4<f32>, 512>;  // [TK][16]: (gate 2i, gate 2i + 1, up 2i, up 2i + 1)
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
    // This thread's outputs: rows 2 tr, 2 tr + 1 of the tile, tokens 4 tt .. 4 tt + 3.
    let tr = lid % 16u;
    let tt = lid / 16u;
    // Staging: tile row wr (gate rows 0..31, then up rows), unit wu; x vec4 xc of tokens xt and
    // xt + 32.
    let wr = lid / 4u;
    let wu = lid % 4u;
    let half = wr / TM;       // 0: gate, 1: up
    let wrr = wr % TM;        // the row within the tile
    let wg4 = wrr / 2u;
    let wc = half * 2u + wrr % 2u;
    let w_ok = row0 + wrr < p.n_ff;
    let wb = (wg.y * 2u * p.n_ff + half * p.n_ff + row0 + wrr) * bpr;
    let xt = lid / 8u;
    let xc = lid % 8u;
    for (var t0 = 0u; t0 < count; t0 += TN) {
        var xo0 = 0xffffffffu;
        var xo1 = 0xffffffffu;
        if (t0 + xt < count) {
            xo0 = lists[head + first + t0 + xt] / p.k * cols4 + xc;
        }
        if (t0 + xt + 32u < count) {
            xo1 = lists[head + first + t0 + xt + 32u] / p.k * cols4 + xc;
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
            xv0 = x[xo0];
        }
        if (xo1 != 0xffffffffu) {
            xv1 = x[xo1];
        }
        for (var k0 = 0u; k0 < p.n_cols; k0 += TK) {
            stage_w8(wg4, wc, wu, wv0, wv1);
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
                    xv0 = x[xo0 + kn / 4u];
                }
                if (xo1 != 0xffffffffu) {
                    xv1 = x[xo1 + kn / 4u];
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
        let r0 = row0 + tr * 2u;
        store2(j0, r0, acc0, count, first, head);
        store2(j0 + 1u, r0, acc1, count, first, head);
        store2(j0 + 2u, r0, acc2, count, first, head);
        store2(j0 + 3u, r0, acc3, count, first, head);
    }
}

// h[s, r0], h[s, r0 + 1] = act(gate) * up from v = (gate r0, gate r0 + 1, up r0, up r0 + 1), for
// the expert's token number j (if it has one), s its route slot; rows past n_ff are skipped.
fn store2(j: u32, r0: u32, v: vec4<f32>, count: u32, first: u32, head: u32) {
    if (j >= count) {
        return;
    }
    let s = lists[head + first + j];
    if (r0 < p.n_ff) {
        h[s * p.n_ff + r0] = glu_act(v.x, p.act) * v.z;
    }
    if (r0 + 1u < p.n_ff) {
        h[s * p.n_ff + r0 + 1u] = glu_act(v.y, p.act) * v.w;
    }
}
