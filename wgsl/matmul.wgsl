// tandem:include common/bits.wgsl
// tandem:include common/step.wgsl
// tandem:include common/tile.wgsl
// tandem:per-qtype
//
// Y[t, y_offset + r] (+)= sum_k W[r, k] * X[t, k] (+ bias) for a batch of tokens (prefill and
// verification): a tiled matrix product whose tile loader dequantizes the weight blocks.
// Work split: a workgroup computes a 64-row x 32-token tile of Y; each k step of 32 stages a
// 64x32 weight tile and a 32x32 activation tile in workgroup memory (common/tile.wgsl); each of
// the 256 threads accumulates 4 rows x 2 tokens.

const TM: u32 = 64u;
const TN: u32 = 32u;
const TK: u32 = 32u;

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
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<uniform> step: Step;

var<workgroup> ws: array<f32, 2048>;  // [TM][TK]
var<workgroup> xs: array<f32, 1024>;  // [TN][TK]

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n_tok = step_rows(step, p.rows_mode);
    let row0 = wg.x * TM;
    let tok0 = wg.y * TN;
    let blocks_per_row = p.n_cols / QK;
    let cols4 = p.n_cols / 4u;
    // This thread's outputs: rows rb..rb+3, tokens tb, tb+1 (tile-relative).
    let rb = (lid % 16u) * 4u;
    let tb = (lid / 16u) * 2u;
    var acc: array<vec4<f32>, 2>;
    for (var k0 = 0u; k0 < p.n_cols; k0 += TK) {
        // Weight tile: thread -> (row lid / 4, unit lid % 4).
        let wr = lid / 4u;
        let grow = row0 + wr;
        stage_w8(wr, lid % 4u, grow < p.n_rows, grow, k0, blocks_per_row);
        // Activation tile: thread -> (token lid / 8, 4 columns).
        let xt = lid / 8u;
        let xc = (lid % 8u) * 4u;
        var xv = vec4<f32>(0.0);
        if (tok0 + xt < n_tok) {
            xv = x[(tok0 + xt) * cols4 + (k0 + xc) / 4u];
        }
        stage_x4(xt, xc, xv);
        workgroupBarrier();
        tile_4x2(&acc, rb, tb);
        workgroupBarrier();
    }
    for (var j = 0u; j < 2u; j++) {
        let t = tok0 + tb + j;
        if (t >= n_tok) {
            continue;
        }
        for (var i = 0u; i < 4u; i++) {
            let r = row0 + rb + i;
            if (r >= p.n_rows) {
                continue;
            }
            var val = acc[j][i];
            if ((p.flags & 1u) != 0u) {
                val += bias[p.y_offset + r];
            }
            let o = t * p.y_stride + p.y_offset + r;
            if ((p.flags & 2u) != 0u) {
                val += y[o];
            }
            y[o] = val;
        }
    }
}
