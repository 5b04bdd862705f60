// tandem:include common/bits.wgsl
// tandem:include common/rms_fold.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/act.wgsl
// tandem:include common/unit_dot.wgsl
// tandem:include common/glu_rows.wgsl
// tandem:include common/route.wgsl
// tandem:per-qtype
// tandem:subgroups
//
// h[j, r] = act(G_e[r, :] . x'[t]) * (U_e[r, :] . x'[t]) for each route j = t k + i of the few
// tokens t of a decode or small pass (the i-th of token t's k routes), e = route[j].id: the
// routed experts' gate and up projections with the activation (SiLU; GELU-tanh) fused. x' = x,
// or RMSNorm(x) * norm_w with flags bit 2 (the FFN norm in the prologue, folded into the row
// pass: common/rms_fold.wgsl). Routes whose expert lies outside this weight chunk
// [e0, e0 + n_exp) are left to the dispatch of the chunk that holds it.
// With flags bit 3, in a decode step (one token: k workgroup rows), each workgroup first routes
// the token itself from the router logits (common/route.wgsl, as moe_router does; layers of at
// most MAX_E experts), and the workgroups of the first rows write their route (id, weight) for
// moe_down; otherwise the routes come from moe_router. Passes of several tokens keep moe_router:
// there each of their k n_tokens workgroup rows would repeat its token's routing.
// Weight layout (made at load from ffn_gate_exps and ffn_up_exps, [n_expert, n_ff, n_embd] each):
// per expert its n_ff gate rows then its n_ff up rows, so expert e - e0 starts at row
// 2 * n_ff * (e - e0) of the chunk.
// Work split: a workgroup per (ROWS rows, route j): grid [n_ff / ROWS, k n_tokens] (an expert two
// tokens chose is read for each, the second time mostly from the cache, as one dispatch runs
// both); as in matvec_glu.wgsl, the rows go in groups of RPT, and the threads of a group stride
// over the units (common/unit_dot.wgsl or the type's twin), reading each unit's x' once for the
// gate and up rows of all RPT outputs, then reduce the gate sums, the up sums (row_sum4 each) and
// the prologue's sum of x^2 (common/reduce.wgsl, or its subgroup twin in the `_sg` variants).

override WG: u32 = 256u;
override ROWS: u32 = 4u;
override RPT: u32 = 1u;  // rows per thread group: 1, 2 or 4, dividing ROWS
const MAX_E: u32 = 256u;  // the most experts it routes itself (kernels::moe::ROUTE_IN_GATE_UP_MAX)

struct Params {
    n_ff: u32,      // rows per expert (expert_feed_forward_length)
    n_cols: u32,    // n_embd
    k: u32,         // routes per token
    e0: u32,        // first expert of this chunk
    n_exp: u32,     // experts in this chunk
    act: u32,       // 0: SiLU, 1: GELU (tanh)
    flags: u32,     // bit 2: RMSNorm prologue; bit 3: route in the prologue
    eps: f32,
    route: RouteParams,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;              // [n_exp, 2, n_ff, n_cols / QK] blocks
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;        // [n_tokens, n_cols]
@group(0) @binding(2) var<storage, read_write> h: array<f32>;        // [n_tokens k, n_ff]
@group(0) @binding(3) var<storage, read_write> route: array<u32>;    // [n_tokens k, 2]: (id, bitcast weight)
@group(0) @binding(4) var<storage, read> norm_w: array<vec4<f32>>;   // [n_cols] or unused
@group(0) @binding(5) var<uniform> p: Params;
@group(0) @binding(6) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs
@group(0) @binding(7) var<storage, read> logits: array<f32>;         // [n_tokens, n_expert]
@group(0) @binding(8) var<storage, read> bias: array<f32>;           // [n_expert] or unused

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let threads = WG * RPT / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row0 = wg.x * ROWS + slot * RPT;
    let j = wg.y;
    let xo = j / p.k * (p.n_cols / 4u);  // the route's token's row of x
    rms_row = xo;
    var e: u32;
    if ((p.flags & 8u) != 0u && nwg.y == p.k) {
        let k = route_token(p.route, 0u, inv.lid);
        e = chosen[j];
        if (wg.x == 0u && inv.lid == 0u) {
            route[j * 2u] = e;
            route[j * 2u + 1u] = bitcast<u32>(route_source(p.route, j) * route_factor(p.route, k));
        }
    } else {
        e = route[j * 2u];
    }
    let mine = e >= p.e0 && e < p.e0 + p.n_exp;
    var d = GluDots(vec4<f32>(0.0), vec4<f32>(0.0));
    if (mine && row0 < p.n_ff) {
        let up = p.n_ff * (p.n_cols / QK);  // an expert's up rows follow its gate rows
        d = glu_dots(2u * (e - p.e0) * up, up, row0, p.n_ff - 1u, xo, lane, threads);
    }
    let out = glu_outputs(d, inv, threads);
    for (var i = lane; i < RPT; i += threads) {
        if (mine && row0 + i < p.n_ff) {
            h[j * p.n_ff + row0 + i] = out[i];
        }
    }
}
