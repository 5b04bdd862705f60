// tandem:include common/bits.wgsl
// tandem:include common/tile.wgsl
// tandem:include common/act.wgsl
// tandem:per-qtype
//
// h[s, r] = act(G_e[r, :] . x[t, :]) * (U_e[r, :] . x[t, :]) for every route slot s = t * k + j
// of a batched pass (2..16 verification tokens, prefill), e = route[s].id: the batched form of
// moe_gate_up.wgsl that reads each selected expert's weights once per pass, not once per token.
// The token lists per expert come from moe_sort.wgsl. x is already normalised.
// Weight layout: as moe_gate_up.wgsl, per expert n_ff gate rows then n_ff up rows.
// Work split: a workgroup per (32-row tile, expert of this chunk): grid [n_ff / 32, n_exp];
// experts with no tokens exit at once. For each tile of 32 of the expert's tokens, each k step
// of 32 stages 32 gate + 32 up rows (dequantized) and the 32 gathered token rows in workgroup
// memory (12 KiB); each of the 256 threads accumulates 4 rows x 1 token for gate and for up.

const TM: u32 = 32u;
const TN: u32 = 32u;
const TK: u32 = 32u;

struct Params {
    n_ff: u32,
    n_cols: u32,    // n_embd, a multiple of 32
    k: u32,
    e0: u32,
    n_exp: u32,
    act: u32,
    n_expert: u32,  // all experts of the layer (the lists' header)
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;              // [n_exp, 2, n_ff, n_cols / QK] blocks
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;        // [n_tokens, n_cols]
@group(0) @binding(2) var<storage, read_write> h: array<f32>;        // [n_tokens * k, n_ff]
@group(0) @binding(3) var<storage, read> lists: array<u32>;          // moe_sort.wgsl's output
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> ws: array<f32, 2048>;  // [2 * TM][TK]: gate rows, then up rows
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
    let ebase = wg.y * 2u * p.n_ff;
    // This thread's outputs: rows rb..rb+3 of the tile, token tb of the token tile.
    let rb = (lid % 8u) * 4u;
    let tb = lid / 8u;
    for (var t0 = 0u; t0 < count; t0 += TN) {
        // The token rows this thread stages: (token xt, columns xc..xc+3) of each k step.
        let xt = lid / 8u;
        let xc = (lid % 8u) * 4u;
        var xrow = 0xffffffffu;
        if (t0 + xt < count) {
            xrow = lists[head + first + t0 + xt] / p.k;
        }
        var ag = vec4<f32>(0.0);
        var au = vec4<f32>(0.0);
        for (var k0 = 0u; k0 < p.n_cols; k0 += TK) {
            // Weight tile: thread -> (tile row lid / 4 of gate|up, unit lid % 4).
            let wr = lid / 4u;
            let r = row0 + (wr % TM);
            stage_w8(wr, lid % 4u, r < p.n_ff, ebase + (wr / TM) * p.n_ff + r, k0, bpr);
            var xv = vec4<f32>(0.0);
            if (xrow != 0xffffffffu) {
                xv = x[xrow * cols4 + (k0 + xc) / 4u];
            }
            stage_x4(xt, xc, xv);
            workgroupBarrier();
            for (var kk = 0u; kk < TK; kk++) {
                let xk = xs[tb * TK + kk];
                ag += tile_w4(rb, kk) * xk;
                au += tile_w4(TM + rb, kk) * xk;
            }
            workgroupBarrier();
        }
        if (t0 + tb < count) {
            let s = lists[head + first + t0 + tb];
            for (var i = 0u; i < 4u; i++) {
                let r = row0 + rb + i;
                if (r < p.n_ff) {
                    h[s * p.n_ff + r] = glu_act(ag[i], p.act) * au[i];
                }
            }
        }
    }
}
