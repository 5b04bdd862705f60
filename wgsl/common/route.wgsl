// Mixture-of-Experts routing of one token in one workgroup: from its router logits to its k
// experts and their weights (moe_router.wgsl for every token of a pass; moe_gate_up.wgsl, which
// routes its own token in its prologue in decode steps).
//   softmax gating (qwen3moe, mixtral):  p = softmax(logits) over all experts; choose the k
//       largest p (the k largest logits: softmax keeps their order, so the selection needs no
//       sum); weights = p of the chosen (renormalised to sum 1 with flags bit 0, when the sum
//       over all experts is not needed either).
//   sigmoid gating (glm4moe, deepseek v3): s = sigmoid(logits); selection scores s + bias
//       (exp_probs_b, flags bit 1); with n_group > 1 only the experts of the topk_group groups
//       with the largest sum of their two best selection scores compete (the others are
//       masked below any unmasked score); weights = the UNBIASED s of the chosen (renormalised
//       with flags bit 0, plus 1e-20 as transformers does).
//   Then weights *= scale (expert_weights_scale, the routed scaling factor).
// Ties: the lowest expert id wins. Chosen experts come out in descending score order.
// Include-only; the includer has WG, MAX_E (the most experts it routes), `bias` (a storage
// array of f32, [n_expert] or unused) and `fn logit_of(t: u32, e: u32) -> f32`, token t's router
// logit for expert e.
// Memory: 3 x MAX_E words + WG + MAX_G + 1 floats of workgroup memory.

const MAX_G: u32 = 64u;
const MASKED: f32 = -3.0e38;   // a group-masked expert: below every real score
// Below every score: the start of a max. Not -inf: WGSL has no infinities in constant
// expressions (Chrome's Tint rejects a bitcast one).
const LOWEST: f32 = -3.4e38;

struct RouteParams {
    n_expert: u32,   // experts of the layer (<= MAX_E)
    k: u32,          // experts per token
    gating: u32,     // 0: softmax, 1: sigmoid
    flags: u32,      // bit 0: renormalise the k weights; bit 1: add the selection bias
    n_group: u32,    // expert groups (1: no group limit); n_expert % n_group == 0, <= 64
    topk_group: u32, // groups kept per token
    scale: f32,      // weights multiplier
    _pad: u32,
}

var<workgroup> prob: array<f32, MAX_E>;  // weight source: the logit (softmax) or s (sigmoid)
// Selection scores, four a slot (the rank pass reads a slot a step): the score, or MASKED;
// LOWEST past ne to a multiple of 4.
var<workgroup> sel: array<vec4<f32>, MAX_E / 4u>;
var<workgroup> rv: array<f32, WG>;
var<workgroup> chosen: array<u32, MAX_E>;  // [k] the chosen experts, best first
var<workgroup> gscore: array<f32, MAX_G>;
var<workgroup> softmax_sum: f32;  // softmax without renormalisation: sum of e^(logit - best)

// Is (v, i) better than (w, j)? Larger score, then lower id.
fn better(v: f32, i: u32, w: f32, j: u32) -> bool {
    return v > w || (v == w && i < j);
}

// `better` for four (v, i) at once against one (w, j).
fn better4(v: vec4<f32>, i: vec4<u32>, w: f32, j: u32) -> vec4<bool> {
    return (v > vec4<f32>(w)) | ((v == vec4<f32>(w)) & (i < vec4<u32>(j)));
}

// Expert i's selection score.
fn sel_at(i: u32) -> f32 {
    return sel[i / 4u][i % 4u];
}

// Sets expert i's selection score.
fn set_sel(i: u32, v: f32) {
    sel[i / 4u][i % 4u] = v;
}

// Sum of one value per thread, returned to all threads.
fn route_sum(v: f32, lid: u32) -> f32 {
    rv[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            rv[lid] += rv[lid + s];
        }
        workgroupBarrier();
    }
    let r = rv[0];
    workgroupBarrier();
    return r;
}

// Routes token t: its k experts into chosen[0 .. k], best first, their weight sources in prob.
// Returns k. Call in uniform control flow (it holds barriers); chosen is visible on return.
fn route_token(rp: RouteParams, t: u32, lid: u32) -> u32 {
    let ne = min(rp.n_expert, MAX_E);
    let use_bias = (rp.flags & 2u) != 0u;
    if (rp.gating == 0u) {
        for (var i = lid; i < ne; i += WG) {
            let v = logit_of(t, i);
            prob[i] = v;
            set_sel(i, v);
        }
    } else {
        for (var i = lid; i < ne; i += WG) {
            let v = 1.0 / (1.0 + exp(-logit_of(t, i)));
            prob[i] = v;
            set_sel(i, select(v, v + bias[i], use_bias));
        }
    }
    // The rank pass below takes four scores a step: the slots past the last expert lose to all.
    let n4 = (ne + 3u) / 4u;
    if (lid < 4u * n4 - ne) {
        set_sel(ne + lid, LOWEST);
    }
    workgroupBarrier();
    // Group limit: score each group by its two best selection scores, keep the topk_group best
    // groups (ties: lower group id), mask the experts of the others.
    let n_group = min(rp.n_group, MAX_G);
    if (n_group > 1u) {
        let gsize = ne / n_group;
        if (lid < n_group) {
            var b1 = LOWEST;
            var b2 = LOWEST;
            for (var i = lid * gsize; i < (lid + 1u) * gsize; i++) {
                let v = sel_at(i);
                if (v > b1) {
                    b2 = b1;
                    b1 = v;
                } else if (v > b2) {
                    b2 = v;
                }
            }
            gscore[lid] = b1 + b2;
        }
        workgroupBarrier();
        for (var i = lid; i < ne; i += WG) {
            let g = i / gsize;
            var rank = 0u;
            for (var h = 0u; h < n_group; h++) {
                if (better(gscore[h], h, gscore[g], g)) {
                    rank++;
                }
            }
            if (rank >= rp.topk_group) {
                set_sel(i, MASKED);
            }
        }
        workgroupBarrier();
    }
    // Selection by rank: an expert's rank is the number of experts `better` than it (a strict
    // order), so the k of rank < k are the chosen ones, best first at slot rank: one pass over the
    // scores in workgroup memory, not k argmax reductions. The pass reads a slot of four scores a
    // step and has no early exit, so no load waits on the compares before it (an exit at rank k
    // made every step wait for the last, and the chosen experts' threads, which scan all the
    // scores, set the length of the routing); the two halves of the workgroup scan the two halves
    // of the slots for the same experts, so each thread takes half the steps, and meet in rv.
    let k = min(rp.k, ne);
    let half = WG / 2u;
    let upper = lid >= half;
    let h_begin = select(0u, n4 / 2u, upper);
    let h_end = select(n4 / 2u, n4, upper);
    for (var i0 = 0u; i0 < ne; i0 += half) {
        let i = i0 + lid % half;
        var rank = 0u;
        if (i < ne) {
            let v = sel_at(i);
            var ranks = vec4<u32>(0u);
            for (var h = h_begin; h < h_end; h++) {
                let ids = vec4<u32>(4u * h) + vec4<u32>(0u, 1u, 2u, 3u);
                ranks += select(vec4<u32>(0u), vec4<u32>(1u), better4(sel[h], ids, v, i));
            }
            rank = ranks.x + ranks.y + ranks.z + ranks.w;
        }
        if (upper) {
            rv[lid - half] = f32(rank);  // exact: a rank is under 2^24
        }
        workgroupBarrier();
        if (!upper && i < ne) {
            let r = rank + u32(rv[lid]);
            if (r < k) {
                chosen[r] = i;
            }
        }
        workgroupBarrier();
    }
    if (rp.gating == 0u && (rp.flags & 1u) == 0u) {
        let m = prob[chosen[0]];
        var s = 0.0;
        for (var i = lid; i < ne; i += WG) {
            s += exp(prob[i] - m);
        }
        s = route_sum(s, lid);
        if (lid == 0u) {
            softmax_sum = s;
        }
        workgroupBarrier();
    }
    return k;
}

// Route j's unnormalised weight (j < k, after route_token): e^(logit - best logit) for softmax
// gating, s for sigmoid gating.
fn route_source(rp: RouteParams, j: u32) -> f32 {
    let v = prob[chosen[j]];
    if (rp.gating == 0u) {
        return exp(v - prob[chosen[0]]);
    }
    return v;
}

// The factor that turns route_source(j) into route j's weight (normalisation and scale), for
// the k chosen by route_token.
fn route_factor(rp: RouteParams, k: u32) -> f32 {
    var d = 1.0;
    if ((rp.flags & 1u) != 0u) {
        d = 0.0;
        for (var j = 0u; j < k; j++) {
            d += route_source(rp, j);
        }
        if (rp.gating == 1u) {
            d += 1e-20;
        }
    } else if (rp.gating == 0u) {
        d = softmax_sum;
    }
    return rp.scale / d;
}
