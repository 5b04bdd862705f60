// tandem:include common/bits.wgsl
// tandem:include common/rms_scale.wgsl
// tandem:include common/reduce.wgsl
// tandem:per-qtype
// tandem:subgroups
//
// h[j, r] = act(G_e[r, :] . x') * (U_e[r, :] . x') for the one token of a decode pass and each
// of its k routes j, e = route[j].id: the routed experts' gate and up projections with the
// activation (SiLU; GELU-tanh) fused. x' = x, or RMSNorm(x) * norm_w with flags bit 2 (the FFN
// norm in the prologue, as in matvec.wgsl). Routes whose expert lies outside this weight chunk
// [e0, e0 + n_exp) are left to the dispatch of the chunk that holds it.
// Weight layout (made at load from ffn_gate_exps and ffn_up_exps, [n_expert, n_ff, n_embd] each):
// per expert its n_ff gate rows then its n_ff up rows, so expert e - e0 starts at row
// 2 * n_ff * (e - e0) of the chunk.
// Work split: a workgroup per (ROWS rows, route j): grid [n_ff / ROWS, k]; the WG / ROWS threads
// of a row stride over its 8-element units accumulating both dot products, then reduce them with
// row_sum2 (common/reduce.wgsl, or its subgroup twin in the `_sg` variants).

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
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;        // [n_cols]
@group(0) @binding(2) var<storage, read_write> h: array<f32>;        // [k, n_ff]
@group(0) @binding(3) var<storage, read> route: array<u32>;          // [k, 2]: (id, bitcast weight)
@group(0) @binding(4) var<storage, read> norm_w: array<vec4<f32>>;   // [n_cols] or unused
@group(0) @binding(5) var<uniform> p: Params;

fn gelu_tanh(v: f32) -> f32 {
    let u = clamp(0.7978845608028654 * (v + 0.044715 * v * v * v), -15.0, 15.0);
    return 0.5 * v * (1.0 + tanh(u));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, inv: Invocation) {
    let threads = WG / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row = wg.x * ROWS + slot;
    let j = wg.y;
    let e = route[j * 2u];
    let mine = e >= p.e0 && e < p.e0 + p.n_exp;
    var scale = 1.0;
    let norm = (p.flags & 4u) != 0u;
    if (norm) {
        scale = rms_scale(inv, p.n_cols, p.eps);
    }
    var ag = 0.0;
    var au = 0.0;
    if (mine && row < p.n_ff) {
        let units = p.n_cols / 8u;
        let bpr = p.n_cols / QK;
        let gate_row = (e - p.e0) * 2u * p.n_ff + row;
        let up_off = p.n_ff * bpr;
        for (var u = lane; u < units; u += threads) {
            let k = u * 8u;
            var x0 = x[u * 2u];
            var x1 = x[u * 2u + 1u];
            if (norm) {
                x0 = x0 * scale * norm_w[u * 2u];
                x1 = x1 * scale * norm_w[u * 2u + 1u];
            }
            let b = gate_row * bpr + k / QK;
            let jj = (k % QK) / 8u;
            let g = dequant8(b, jj);
            let v = dequant8(b + up_off, jj);
            ag += dot(g[0], x0) + dot(g[1], x1);
            au += dot(v[0], x0) + dot(v[1], x1);
        }
    }
    let gu = row_sum2(vec2<f32>(ag, au), inv, threads);
    if (lane == 0u && mine && row < p.n_ff) {
        let g = gu.x;
        var a: f32;
        if (p.act == 0u) {
            a = g / (1.0 + exp(-g));
        } else {
            a = gelu_tanh(g);
        }
        h[j * p.n_ff + row] = a * gu.y;
    }
}
