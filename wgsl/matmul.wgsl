// tandem:include common/bits.wgsl
// tandem:include common/mat_io.wgsl
// tandem:include common/gemm_tile.wgsl
// tandem:per-qtype
//
// Y[t, y_offset + r] (+)= sum_k W[r, k] * X[t, k] (+ bias) for a batch of tokens (prefill, and
// verification passes of more than 8 tokens): a register-blocked matrix product whose tile
// loader dequantizes the weight blocks.
// Work split: a workgroup computes a 64-row x 64-token tile of Y (grid [n_rows / 64, n / 64]);
// each of its 256 threads accumulates a 4-row x 4-token block in four vec4 registers. Each k
// step of 32 stages the 64x32 weight tile (each thread dequantizes one unit of 8 weights) and
// the 64x32 activation tile (two vec4 loads a thread) in workgroup memory, k-major, as vec4s of
// 4 rows (ws) and of 4 tokens (xs): 8 KiB each, 16 KiB in all (WebGPU's default limit). The
// inner loop reads one vec4 of each for 16 FMAs. The next k step's weights and activations are
// loaded into registers while the current tiles are multiplied.
// The tile layout and its bank swizzle: common/gemm_tile.wgsl.

const TM: u32 = 64u;
const TN: u32 = 64u;
const TK: u32 = 32u;


var<workgroup> ws: array<vec4<f32>, 512>;  // [TK][TM / 4], swizzled (common/gemm_tile.wgsl)
var<workgroup> xs: array<vec4<f32>, 512>;  // [TK][TN / 4], swizzled

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n_tok = step_rows(step, p.rows_mode);
    let row0 = wg.x * TM;
    let tok0 = wg.y * TN;
    let bpr = p.n_cols / QK;
    let cols4 = p.n_cols / 4u;
    // This thread's outputs: rows 4 tr .. 4 tr + 3, tokens 4 tt .. 4 tt + 3 (tile-relative).
    let tr = lid % 16u;
    let tt = lid / 16u;
    // Staging: weight row wr, unit wu (columns 8 wu ..); activation vec4s lid and lid + 256 of
    // the tile, token xt (xt + 32), columns 4 xc ...
    let wr = lid / 4u;
    let wu = lid % 4u;
    let w_ok = row0 + wr < p.n_rows;
    let wb = (row0 + wr) * bpr;
    let xt = lid / 8u;
    let xc = lid % 8u;
    let x_ok0 = tok0 + xt < n_tok;
    let x_ok1 = tok0 + xt + 32u < n_tok;
    let xo0 = (tok0 + xt) * cols4 + xc;
    let xo1 = xo0 + 32u * cols4;

    var acc0 = vec4<f32>(0.0);  // token 4 tt + 0, rows 4 tr .. 4 tr + 3
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);

    // Registers holding the next k step's tiles.
    var wv0 = vec4<f32>(0.0);
    var wv1 = vec4<f32>(0.0);
    var xv0 = vec4<f32>(0.0);
    var xv1 = vec4<f32>(0.0);
    if (w_ok) {
        let v = dequant8(wb + (wu * 8u) / QK, ((wu * 8u) % QK) / 8u);
        wv0 = v[0];
        wv1 = v[1];
    }
    if (x_ok0) {
        xv0 = x[xo0];
    }
    if (x_ok1) {
        xv1 = x[xo1];
    }

    for (var k0 = 0u; k0 < p.n_cols; k0 += TK) {
        // Store the staged registers, k-major.
        stage_w8(wr / 4u, wr % 4u, wu, wv0, wv1);
        stage_x4(xt, xc, xv0);
        stage_x4(xt + 32u, xc, xv1);
        workgroupBarrier();

        // Load the next k step into registers while this one is multiplied.
        let kn = k0 + TK;
        if (kn < p.n_cols) {
            if (w_ok) {
                let k = kn + wu * 8u;
                let v = dequant8(wb + k / QK, (k % QK) / 8u);
                wv0 = v[0];
                wv1 = v[1];
            }
            if (x_ok0) {
                xv0 = x[xo0 + kn / 4u];
            }
            if (x_ok1) {
                xv1 = x[xo1 + kn / 4u];
            }
        }

        for (var kk = 0u; kk < TK; kk++) {
            let a = ws[slot(kk, tr)];
            let b = xs[slot(kk, tt)];
            acc0 = fma(a, vec4<f32>(b.x), acc0);
            acc1 = fma(a, vec4<f32>(b.y), acc1);
            acc2 = fma(a, vec4<f32>(b.z), acc2);
            acc3 = fma(a, vec4<f32>(b.w), acc3);
        }
        workgroupBarrier();
    }

    let r0 = row0 + tr * 4u;
    let t0 = tok0 + tt * 4u;
    store4(t0, r0, acc0, n_tok);
    store4(t0 + 1u, r0, acc1, n_tok);
    store4(t0 + 2u, r0, acc2, n_tok);
    store4(t0 + 3u, r0, acc3, n_tok);
}

// Writes rows r0 .. r0 + 3 of token t (those inside the matrix and the pass), with the bias
// and accumulate flags.
fn store4(t: u32, r0: u32, v: vec4<f32>, n_tok: u32) {
    if (t >= n_tok) {
        return;
    }
    for (var i = 0u; i < 4u; i++) {
        let r = r0 + i;
        if (r >= p.n_rows) {
            return;
        }
        store_out(t, r, v[i]);
    }
}
