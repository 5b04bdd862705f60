// tandem:include common/route.wgsl
// The parameters, bindings and routing prologue of moe_gate_up.wgsl and its `_q8` twin
// moe_gate_up_q8.wgsl (kernels::moe::gate_up builds one bind group for either). Include-only; the
// includer has WG.

const MAX_E: u32 = 256u;  // the most experts it routes itself (kernels::moe::ROUTE_IN_GATE_UP_MAX)

struct Params {
    n_ff: u32,      // rows per expert (expert_feed_forward_length)
    n_cols: u32,    // n_embd
    k: u32,         // routes per token
    e0: u32,        // first expert of this chunk
    n_exp: u32,     // experts in this chunk
    act: u32,       // 0: SiLU, 1: GELU (tanh)
    flags: u32,     // bit 2: RMSNorm prologue; bit 3: route in the prologue; bit 4: from shares
    eps: f32,
    route: RouteParams,
    share_at: u32,  // with flags bit 4: the layer's slot of the router's shares (words)
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;              // [n_exp, 2, n_ff, n_cols / QK] blocks
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;        // [n_tokens, n_cols]
@group(0) @binding(2) var<storage, read_write> h: array<f32>;        // [n_tokens k, n_ff]
@group(0) @binding(3) var<storage, read_write> route: array<u32>;    // [n_tokens k, 2]: (id, bitcast weight)
@group(0) @binding(4) var<storage, read> norm_w: array<vec4<f32>>;   // [n_cols] or unused
@group(0) @binding(5) var<uniform> p: Params;
@group(0) @binding(6) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs
// [n_tokens, n_expert] f32 bits, or with flags bit 4 the router's shares (common/route_share.wgsl)
@group(0) @binding(7) var<storage, read> logits: array<u32>;
@group(0) @binding(8) var<storage, read> bias: array<f32>;           // [n_expert] or unused

// The token's RMSNorm scale s, for the logits summed from the router's shares.
var<private> share_scale: f32;

// Expert e's summed shares in the layer's slot, whose 52-bit fixed point common/route_share.wgsl
// describes.
fn shares_sum(e: u32) -> f32 {
    let ne = p.route.n_expert;
    var v = 0.0;
    for (var s = 0u; s < 2u; s++) {
        let o = p.share_at + 3u * ne * s + e;
        let m = f32(logits[o + 2u * ne]) * 256.0 + f32(logits[o + ne]) / 4096.0
            + f32(logits[o]) / 4294967296.0;
        v += select(m, -m, s == 1u);
    }
    return v;
}

// Token t's router logit for expert e (common/route.wgsl): from the router's logits, or (flags
// bit 4, a decode step) s times the summed shares.
fn logit_of(t: u32, e: u32) -> f32 {
    if ((p.flags & 16u) == 0u) {
        return bitcast<f32>(logits[t * p.route.n_expert + e]);
    }
    return shares_sum(e) * share_scale;
}

// The expert of route j (a workgroup row of the grid [n_ff / ROWS, nwg_y = k n_tokens]): in a
// decode step with flags bit 3 (nwg_y == k), routed here from the token's router logits
// (common/route.wgsl, as moe_router does; with flags bit 4 from the shares the attention output
// left, and s from x), and the workgroups of grid column 0 write the route (id, weight) for
// moe_down; otherwise read from moe_router's routes. Passes of several tokens keep moe_router:
// there each of a token's k workgroup rows would repeat its routing in every wave of the grid
// (on the H200, a 4-token pass of the Qwen3-30B-A3B shape 6% slower, an 8-token one 13%;
// bench/RESULTS.md, twenty-ninth session). Every invocation calls it, in uniform control flow.
fn route_expert(j: u32, wg_x: u32, nwg_y: u32, inv: Invocation) -> u32 {
    let lid = inv.lid;
    if ((p.flags & 8u) != 0u && nwg_y == p.k) {
        if ((p.flags & 16u) != 0u) {
            let row = (j / p.k) * (p.n_cols / 4u);
            var ss = 0.0;
            for (var i = lid; i < p.n_cols / 4u; i += WG) {
                let v = x[row + i];
                ss += dot(v, v);
            }
            share_scale = inverseSqrt(row_sum(ss, inv, WG) / f32(p.n_cols) + p.eps);
        }
        let i = j % p.k;  // the route's rank among its token's
        let k = route_token(p.route, j / p.k, lid);
        let e = chosen[i];
        if (wg_x == 0u && lid == 0u) {
            route[j * 2u] = e;
            route[j * 2u + 1u] = bitcast<u32>(route_source(p.route, i) * route_factor(p.route, k));
        }
        return e;
    }
    return route[j * 2u];
}
