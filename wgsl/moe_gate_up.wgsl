// tandem:include common/bits.wgsl
// tandem:include common/rms_fold.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/act.wgsl
// tandem:include common/unit_dot.wgsl
// tandem:per-qtype
// tandem:subgroups
//
// h[j, r] = act(G_e[r, :] . x'[t]) * (U_e[r, :] . x'[t]) for each route j = t k + i of the few
// tokens t of a decode or small pass (the i-th of token t's k routes), e = route[j].id: the
// routed experts' gate and up projections with the activation (SiLU; GELU-tanh) fused. x' = x,
// or RMSNorm(x) * norm_w with flags bit 2 (the FFN norm in the prologue, folded into the row
// pass: common/rms_fold.wgsl). Routes whose expert lies outside this weight chunk
// [e0, e0 + n_exp) are left to the dispatch of the chunk that holds it.
// Weight layout (made at load from ffn_gate_exps and ffn_up_exps, [n_expert, n_ff, n_embd] each):
// per expert its n_ff gate rows then its n_ff up rows, so expert e - e0 starts at row
// 2 * n_ff * (e - e0) of the chunk.
// Work split: a workgroup per (ROWS rows, route j): grid [n_ff / ROWS, k n_tokens] (an expert two
// tokens chose is read for each, the second time mostly from the cache, as one dispatch runs
// both); the WG / ROWS threads of a row stride over its units accumulating both dot products
// (unit_dot2: common/unit_dot.wgsl or the type's twin), then reduce them and the prologue's sum
// of x^2 with row_sum4 (common/reduce.wgsl, or its subgroup twin in the `_sg` variants).

override WG: u32 = 256u;
override ROWS: u32 = 4u;

struct Params {
    n_ff: u32,      // rows per expert (expert_feed_forward_length)
    n_cols: u32,    // n_embd
    k: u32,         // routes per token
    e0: u32,        // first expert of this chunk
    n_exp: u32,     // experts in this chunk
    act: u32,       // 0: SiLU, 1: GELU (tanh)
    flags: u32,     // bit 2: RMSNorm prologue
    eps: f32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;              // [n_exp, 2, n_ff, n_cols / QK] blocks
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;        // [n_tokens, n_cols]
@group(0) @binding(2) var<storage, read_write> h: array<f32>;        // [n_tokens k, n_ff]
@group(0) @binding(3) var<storage, read> route: array<u32>;          // [n_tokens k, 2]: (id, bitcast weight)
@group(0) @binding(4) var<storage, read> norm_w: array<vec4<f32>>;   // [n_cols] or unused
@group(0) @binding(5) var<uniform> p: Params;
@group(0) @binding(6) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, inv: Invocation) {
    let threads = WG / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row = wg.x * ROWS + slot;
    let j = wg.y;
    let xo = j / p.k * (p.n_cols / 4u);  // the route's token's row of x
    rms_row = xo;
    let e = route[j * 2u];
    let mine = e >= p.e0 && e < p.e0 + p.n_exp;
    var gu = vec2<f32>(0.0);
    if (mine && row < p.n_ff) {
        let bpr = p.n_cols / QK;
        let gb = ((e - p.e0) * 2u * p.n_ff + row) * bpr;
        for (var u = lane; u < p.n_cols / UNIT; u += threads) {
            gu += unit_dot2(gb, gb + p.n_ff * bpr, u, xo);
        }
    }
    let sum = row_sum4(vec4<f32>(gu, x_ss, 0.0), inv, threads);
    gu = sum.xy * rms_fold_scale(sum.z, p.n_cols, p.eps);
    if (lane == 0u && mine && row < p.n_ff) {
        h[j * p.n_ff + row] = glu_act(gu.x, p.act) * gu.y;
    }
}
