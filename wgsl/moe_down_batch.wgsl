// tandem:include common/bits.wgsl
// tandem:include common/tile.wgsl
// tandem:per-qtype
//
// o[s, r] = weight_s * (D_e[r, :] . h[s, :]) for every route slot s = t * k + j of a batched pass,
// e = route[s].id: the batched form of moe_down.wgsl, reading each selected expert's weights once
// per pass. The sum over a token's k slots and the residual add follow in moe_combine.wgsl (a
// fixed order, no float atomics).
// Weight layout: ffn_down_exps as stored, [n_exp, n_rows, n_cols].
// Work split: a workgroup per (64-row tile, expert of this chunk): grid [n_rows / 64, n_exp];
// experts with no tokens exit at once. For each tile of 32 of the expert's slots, each k step of
// 32 stages a 64x32 weight tile and the 32 gathered h rows in workgroup memory (12 KiB); each of
// the 256 threads accumulates 4 rows x 2 slots.

const TM: u32 = 64u;
const TN: u32 = 32u;
const TK: u32 = 32u;

struct Params {
    n_rows: u32,    // n_embd
    n_cols: u32,    // n_ff, a multiple of 32
    k: u32,
    e0: u32,
    n_exp: u32,
    n_expert: u32,  // all experts of the layer (the lists' header)
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;              // [n_exp, n_rows, n_cols / QK] blocks
@group(0) @binding(1) var<storage, read> h: array<vec4<f32>>;        // [n_tokens * k, n_cols]
@group(0) @binding(2) var<storage, read_write> o: array<f32>;        // [n_tokens * k, n_rows]
@group(0) @binding(3) var<storage, read> lists: array<u32>;          // moe_sort.wgsl's output
@group(0) @binding(4) var<storage, read> route: array<u32>;          // [n_tokens * k, 2]
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> ws: array<f32, 2048>;  // [TM][TK]
var<workgroup> xs: array<f32, 1024>;  // [TN][TK]
var<workgroup> sh_first: u32;
var<workgroup> sh_count: u32;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let e = p.e0 + wg.y;
    if (lid == 0u) {
        sh_first = lists[e];
        sh_count = lists[e + 1u] - lists[e];
    }
    let count = workgroupUniformLoad(&sh_count);
    if (count == 0u) {
        return;
    }
    let first = sh_first;
    let head = p.n_expert + 1u;
    let row0 = wg.x * TM;
    let bpr = p.n_cols / QK;
    let cols4 = p.n_cols / 4u;
    let ebase = wg.y * p.n_rows;
    let rb = (lid % 16u) * 4u;
    let tb = (lid / 16u) * 2u;
    for (var t0 = 0u; t0 < count; t0 += TN) {
        let xt = lid / 8u;
        let xc = (lid % 8u) * 4u;
        var xrow = 0xffffffffu;
        if (t0 + xt < count) {
            xrow = lists[head + first + t0 + xt];
        }
        var acc = array<vec4<f32>, 2>(vec4<f32>(0.0), vec4<f32>(0.0));
        for (var k0 = 0u; k0 < p.n_cols; k0 += TK) {
            let wr = lid / 4u;
            let r = row0 + wr;
            stage_w8(wr, lid % 4u, r < p.n_rows, ebase + r, k0, bpr);
            var xv = vec4<f32>(0.0);
            if (xrow != 0xffffffffu) {
                xv = h[xrow * cols4 + (k0 + xc) / 4u];
            }
            stage_x4(xt, xc, xv);
            workgroupBarrier();
            tile_4x2(&acc, rb, tb);
            workgroupBarrier();
        }
        for (var jj = 0u; jj < 2u; jj++) {
            if (t0 + tb + jj >= count) {
                continue;
            }
            let s = lists[head + first + t0 + tb + jj];
            let wt = bitcast<f32>(route[s * 2u + 1u]);
            for (var i = 0u; i < 4u; i++) {
                let r = row0 + rb + i;
                if (r < p.n_rows) {
                    o[s * p.n_rows + r] = wt * acc[jj][i];
                }
            }
        }
    }
}
