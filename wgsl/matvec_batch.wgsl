// tandem:include common/bits.wgsl
// tandem:include common/mat_io.wgsl
// tandem:include common/matvec_io.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/act.wgsl
// tandem:include common/unit32.wgsl
// tandem:per-qtype
// tandem:subgroups
//
// Y[t, y_offset + r] (+)= sum_k W[r, k] * X'[t, k] (+ bias[y_offset + r]) for a small batch of
// tokens (speculative verification, short prompt chunks; kernels::mat says up to how many): the
// decode matvec's split with every weight read once for each group of 8 tokens (grid z).
// X' is X, or RMSNorm(X) * norm_w with the norm prologue (NORM, a pipeline of its own so that the
// plain one keeps its registers), folded in as in the decode matvec (common/rms_fold.wgsl):
// norm_w scales each dequantized unit (once for all the tokens), each token's sum of x^2 comes
// from the loads its dot product makes and rides the row's reductions, and the token's 1 / rms
// scales its sums at the end.
// With GLU, W is a gated FFN's [G; U] and the output h[t, r] = act(G[r] . X'[t]) * (U[r] . X'[t])
// (SiLU; GELU-tanh with flags bit 3), so a small pass takes its FFN's input side in one dispatch
// as decode does (matvec_glu.wgsl): a workgroup's first ROWS / 2 row slots take gate rows, the
// others the up rows of the same outputs, which they hand over through workgroup memory.
// Work split: as matvec.wgsl, each workgroup takes ROWS rows and the WG / ROWS threads of a row
// stride over its units of 32 weights; each thread dequantizes a unit once (unit32,
// common/unit32.wgsl or the type's twin) and accumulates it against the x of every token, in
// eight registers (tokens past the pass are skipped by uniform branches; with the prologue each
// holds the sum of squares too), then the row's threads reduce the eight sums with two row_sum4
// (common/reduce.wgsl: a tree in workgroup memory; in the `_sg` variants, subgroupAdd and one step
// across subgroups), two more for the prologue's sums of squares. Workgroups are laid out 2-D as
// the matvec's in x and y; z is the group of 8 tokens.

override WG: u32 = 256u;
override ROWS: u32 = 4u;  // a power of two; the matvec's shape (kernels::MatvecShape); >= 2 with GLU
override GLU: u32 = 0u;   // 1: W is [G; U], n_rows the outputs (kernels::glu_small)
override NORM: u32 = 0u;  // 1: the RMSNorm prologue (norm_w, p.eps)

const BATCH: u32 = 8u;  // tokens a workgroup (kernels::mat: MATVEC_BATCH_GROUP)

// With GLU, the up rows' sums of the workgroup's outputs (two vec4s of tokens each).
var<workgroup> up_sums: array<vec4<f32>, ROWS>;

// The dot product of the unit of 32 weights v with the columns xi of the token row at vec4 o,
// and with the prologue the sum of x^2 over those columns.
fn xdot(v: array<mat4x4<f32>, 2>, xi: array<vec4<u32>, 2>, o: u32) -> vec2<f32> {
    var s = vec2<f32>(0.0);
    for (var h = 0u; h < 2u; h++) {
        let x0 = x[o + xi[h].x];
        let x1 = x[o + xi[h].y];
        let x2 = x[o + xi[h].z];
        let x3 = x[o + xi[h].w];
        s.x += dot(v[h][0], x0) + dot(v[h][1], x1) + dot(v[h][2], x2) + dot(v[h][3], x3);
        if (NORM != 0u) {
            s.y += dot(x0, x0) + dot(x1, x1) + dot(x2, x2) + dot(x3, x3);
        }
    }
    return s;
}

// The unit v scaled by norm_w at its columns xi: (x * norm_w) . w = x . (w * norm_w).
fn normed_unit(v: array<mat4x4<f32>, 2>, xi: array<vec4<u32>, 2>) -> array<mat4x4<f32>, 2> {
    var r = v;
    for (var h = 0u; h < 2u; h++) {
        for (var j = 0u; j < 4u; j++) {
            r[h][j] = v[h][j] * norm_w[xi[h][j]];
        }
    }
    return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let tok0 = wg.z * BATCH;
    let n_tok = min(step_rows(step, p.rows_mode) - tok0, BATCH);
    let threads = WG / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let wg_index = wg.x + wg.y * nwg.x;
    // The output row of this slot, and the weight row it reads (with GLU: gate rows in the
    // first half of the slots, up rows in the second).
    let half = max(ROWS / 2u, 1u);  // (ROWS >= 2 with GLU; the max keeps ROWS = 1 valid)
    var out_row = wg_index * ROWS + slot;
    var row = out_row;
    if (GLU != 0u) {
        out_row = wg_index * half + slot % half;
        row = out_row + select(0u, p.n_rows, slot >= half);
    }
    let cols4 = p.n_cols / 4u;
    let xo = tok0 * cols4;
    var a0 = vec2<f32>(0.0);
    var a1 = vec2<f32>(0.0);
    var a2 = vec2<f32>(0.0);
    var a3 = vec2<f32>(0.0);
    var a4 = vec2<f32>(0.0);
    var a5 = vec2<f32>(0.0);
    var a6 = vec2<f32>(0.0);
    var a7 = vec2<f32>(0.0);
    if (out_row < p.n_rows) {
        let rb = row * (p.n_cols / QK);
        for (var u = lane; u < p.n_cols / 32u; u += threads) {
            var v = unit32(rb, u);
            let xi = array<vec4<u32>, 2>(unit32_x(u, 0u), unit32_x(u, 1u));
            if (NORM != 0u) {
                v = normed_unit(v, xi);
            }
            a0 += xdot(v, xi, xo);
            if (n_tok > 1u) {
                a1 += xdot(v, xi, xo + cols4);
            }
            if (n_tok > 2u) {
                a2 += xdot(v, xi, xo + 2u * cols4);
            }
            if (n_tok > 3u) {
                a3 += xdot(v, xi, xo + 3u * cols4);
            }
            if (n_tok > 4u) {
                a4 += xdot(v, xi, xo + 4u * cols4);
            }
            if (n_tok > 5u) {
                a5 += xdot(v, xi, xo + 5u * cols4);
            }
            if (n_tok > 6u) {
                a6 += xdot(v, xi, xo + 6u * cols4);
            }
            if (n_tok > 7u) {
                a7 += xdot(v, xi, xo + 7u * cols4);
            }
        }
    }
    var s0 = row_sum4(vec4<f32>(a0.x, a1.x, a2.x, a3.x), inv, threads);
    workgroupBarrier();
    var s1 = row_sum4(vec4<f32>(a4.x, a5.x, a6.x, a7.x), inv, threads);
    if (NORM != 0u) {
        workgroupBarrier();
        let n0 = row_sum4(vec4<f32>(a0.y, a1.y, a2.y, a3.y), inv, threads);
        workgroupBarrier();
        let n1 = row_sum4(vec4<f32>(a4.y, a5.y, a6.y, a7.y), inv, threads);
        s0 *= inverseSqrt(n0 / f32(p.n_cols) + p.eps);
        s1 *= inverseSqrt(n1 / f32(p.n_cols) + p.eps);
    }
    if (GLU == 0u) {
        if (lane == 0u && out_row < p.n_rows) {
            store8(tok0, out_row, s0, s1, n_tok);
        }
        return;
    }
    if (lane == 0u && slot >= half) {
        up_sums[2u * (slot - half)] = s0;
        up_sums[2u * (slot - half) + 1u] = s1;
    }
    workgroupBarrier();
    if (lane == 0u && slot < half && out_row < p.n_rows) {
        let act = (p.flags >> 3u) & 1u;
        let u0 = up_sums[2u * slot];
        let u1 = up_sums[2u * slot + 1u];
        store8(tok0, out_row, glu_act4(s0, act) * u0, glu_act4(s1, act) * u1, n_tok);
    }
}

// Writes output `row` of tokens tok0 .. tok0 + 7 (those of the pass) from s0, s1
// (common/mat_io.wgsl's store_out).
fn store8(tok0: u32, row: u32, s0: vec4<f32>, s1: vec4<f32>, n_tok: u32) {
    for (var j = 0u; j < 4u; j++) {
        if (j < n_tok) {
            store_out(tok0 + j, row, s0[j]);
        }
        if (4u + j < n_tok) {
            store_out(tok0 + 4u + j, row, s1[j]);
        }
    }
}
