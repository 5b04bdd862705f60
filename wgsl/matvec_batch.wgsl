// tandem:include common/bits.wgsl
// tandem:include common/step.wgsl
// tandem:include common/reduce.wgsl
// tandem:per-qtype
// tandem:subgroups
//
// Y[t, y_offset + r] (+)= sum_k W[r, k] * X[t, k] (+ bias[y_offset + r]) for a small batch of 2
// to 8 tokens (speculative verification, short prompt chunks): the decode matvec's split with
// every weight read once for all the tokens of the pass.
// Work split: as matvec.wgsl, each workgroup takes ROWS rows and the WG / ROWS threads of a row
// stride over its units of 8 weights; each thread dequantizes a unit once (dequant8) and
// accumulates it against the x of every token, in eight scalar registers (tokens past the
// pass are skipped by uniform branches), then the row's threads reduce the eight sums with two
// row_sum4 (common/reduce.wgsl: a tree in workgroup memory; in the `_sg` variants, subgroupAdd
// and one step across subgroups). Workgroups are laid out 2-D as the matvec's.

override WG: u32 = 256u;
override ROWS: u32 = 4u;  // a power of two; the matvec's shape (kernels::MatvecShape)

const BATCH: u32 = 8u;  // most tokens a pass; more take matmul.wgsl

struct Params {
    n_rows: u32,
    n_cols: u32,    // a multiple of 32
    y_stride: u32,
    y_offset: u32,
    flags: u32,     // bit 0: add bias; bit 1: accumulate into y (bit 2: matvec's norm prologue)
    rows_mode: u32, // 0: all tokens, 1: the output rows
    eps: f32,
    _pad0: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;         // [n_rows, n_cols / QK] blocks
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;   // [n_tokens, n_cols]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;   // [n_tokens, y_stride]
@group(0) @binding(3) var<storage, read> bias: array<f32>;      // [y_offset + n_rows] or unused
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<uniform> step: Step;

// The dot product of the unit of 8 weights v with the same 8 columns (vec4s o, o + 1) of x.
fn xdot(v: array<vec4<f32>, 2>, o: u32) -> f32 {
    return dot(v[0], x[o]) + dot(v[1], x[o + 1u]);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let n_tok = min(step_rows(step, p.rows_mode), BATCH);
    let threads = WG / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row = (wg.x + wg.y * nwg.x) * ROWS + slot;
    let cols4 = p.n_cols / 4u;
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
        for (var u = lane; u < p.n_cols / 8u; u += threads) {
            let k = u * 8u;
            let v = dequant8(rb + k / QK, (k % QK) / 8u);
            let o = 2u * u;
            a0 += xdot(v, o);
            if (n_tok > 1u) {
                a1 += xdot(v, o + cols4);
            }
            if (n_tok > 2u) {
                a2 += xdot(v, o + 2u * cols4);
            }
            if (n_tok > 3u) {
                a3 += xdot(v, o + 3u * cols4);
            }
            if (n_tok > 4u) {
                a4 += xdot(v, o + 4u * cols4);
            }
            if (n_tok > 5u) {
                a5 += xdot(v, o + 5u * cols4);
            }
            if (n_tok > 6u) {
                a6 += xdot(v, o + 6u * cols4);
            }
            if (n_tok > 7u) {
                a7 += xdot(v, o + 7u * cols4);
            }
        }
    }
    let s0 = row_sum4(vec4<f32>(a0, a1, a2, a3), inv, threads);
    workgroupBarrier();
    let s1 = row_sum4(vec4<f32>(a4, a5, a6, a7), inv, threads);
    if (lane == 0u && row < p.n_rows) {
        store(0u, row, s0.x, n_tok);
        store(1u, row, s0.y, n_tok);
        store(2u, row, s0.z, n_tok);
        store(3u, row, s0.w, n_tok);
        store(4u, row, s1.x, n_tok);
        store(5u, row, s1.y, n_tok);
        store(6u, row, s1.z, n_tok);
        store(7u, row, s1.w, n_tok);
    }
}

// Writes output `row` of token t (if t is in the pass) with the bias and accumulate flags.
fn store(t: u32, row: u32, v: f32, n_tok: u32) {
    if (t >= n_tok) {
        return;
    }
    var r = v;
    if ((p.flags & 1u) != 0u) {
        r += bias[p.y_offset + row];
    }
    let o = t * p.y_stride + p.y_offset + row;
    if ((p.flags & 2u) != 0u) {
        r += y[o];
    }
    y[o] = r;
}
