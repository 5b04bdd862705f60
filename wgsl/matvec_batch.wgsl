// tandem:include common/bits.wgsl
// tandem:include common/mat_io.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/unit32.wgsl
// tandem:per-qtype
// tandem:subgroups
//
// Y[t, y_offset + r] (+)= sum_k W[r, k] * X[t, k] (+ bias[y_offset + r]) for a small batch of
// tokens (speculative verification, short prompt chunks; kernels::mat says up to how many): the
// decode matvec's split with every weight read once for each group of 8 tokens (grid z).
// Work split: as matvec.wgsl, each workgroup takes ROWS rows and the WG / ROWS threads of a row
// stride over its units of 32 weights; each thread dequantizes a unit once (unit32,
// common/unit32.wgsl or the type's twin) and accumulates it against the x of every token, in
// eight scalar registers (tokens past the pass are skipped by uniform branches), then the row's
// threads reduce the eight sums with two row_sum4 (common/reduce.wgsl: a tree in workgroup
// memory; in the `_sg` variants, subgroupAdd and one step across subgroups). Workgroups are
// laid out 2-D as the matvec's in x and y; z is the group of 8 tokens.

override WG: u32 = 256u;
override ROWS: u32 = 4u;  // a power of two; the matvec's shape (kernels::MatvecShape)

const BATCH: u32 = 8u;  // tokens a workgroup (kernels::mat: MATVEC_BATCH_GROUP)


@group(0) @binding(7) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs

// The dot product of the unit of 32 weights v with the columns xi of the token row at vec4 o.
fn xdot(v: array<mat4x4<f32>, 2>, xi: array<vec4<u32>, 2>, o: u32) -> f32 {
    var s = 0.0;
    for (var h = 0u; h < 2u; h++) {
        s += dot(v[h][0], x[o + xi[h].x]) + dot(v[h][1], x[o + xi[h].y])
           + dot(v[h][2], x[o + xi[h].z]) + dot(v[h][3], x[o + xi[h].w]);
    }
    return s;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let tok0 = wg.z * BATCH;
    let n_tok = min(step_rows(step, p.rows_mode) - tok0, BATCH);
    let threads = WG / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row = (wg.x + wg.y * nwg.x) * ROWS + slot;
    let cols4 = p.n_cols / 4u;
    let xo = tok0 * cols4;
    var a0 = 0.0;
    var a1 = 0.0;
    var a2 = 0.0;
    var a3 = 0.0;
    var a4 = 0.0;
    var a5 = 0.0;
    var a6 = 0.0;
    var a7 = 0.0;
    if (row < p.n_rows) {
        let rb = row * (p.n_cols / QK);
        for (var u = lane; u < p.n_cols / 32u; u += threads) {
            let v = unit32(rb, u);
            let xi = array<vec4<u32>, 2>(unit32_x(u, 0u), unit32_x(u, 1u));
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
    let s0 = row_sum4(vec4<f32>(a0, a1, a2, a3), inv, threads);
    workgroupBarrier();
    let s1 = row_sum4(vec4<f32>(a4, a5, a6, a7), inv, threads);
    if (lane == 0u && row < p.n_rows) {
        store(tok0, 0u, row, s0.x, n_tok);
        store(tok0, 1u, row, s0.y, n_tok);
        store(tok0, 2u, row, s0.z, n_tok);
        store(tok0, 3u, row, s0.w, n_tok);
        store(tok0, 4u, row, s1.x, n_tok);
        store(tok0, 5u, row, s1.y, n_tok);
        store(tok0, 6u, row, s1.z, n_tok);
        store(tok0, 7u, row, s1.w, n_tok);
    }
}

// Writes output `row` of token tok0 + j if j < n_tok (common/mat_io.wgsl's store_out).
fn store(tok0: u32, j: u32, row: u32, v: f32, n_tok: u32) {
    if (j < n_tok) {
        store_out(tok0 + j, row, v);
    }
}
