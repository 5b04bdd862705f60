// tandem:include common/step.wgsl
//
// Mixture-of-Experts routing: from the router logits of each token (a normal matvec/matmul of
// ffn_gate_inp) to its k experts and their weights, on the GPU.
//   softmax gating (qwen3moe, mixtral):  p = softmax(logits) over all experts; choose the k
//       largest p; weights = p of the chosen (renormalised to sum 1 with flags bit 0).
//   sigmoid gating (glm4moe, deepseek v3): s = sigmoid(logits); selection scores s + bias
//       (exp_probs_b, flags bit 1); with n_group > 1 only the experts of the topk_group groups
//       with the largest sum of their two best selection scores compete (the others are
//       masked below any unmasked score); weights = the UNBIASED s of the chosen (renormalised
//       with flags bit 0, plus 1e-20 as transformers does).
//   Then weights *= scale (expert_weights_scale, the routed scaling factor).
// Ties: the lowest expert id wins. Chosen experts come out in descending score order.
// Work split: one workgroup of 256 threads per token; thread i holds experts i, i + 256, ...
// and ranks them against all the others.
// Memory: 3 x MAX_E words + 256 floats + MAX_G floats = 13.25 KiB of workgroup memory.

const WG: u32 = 256u;
const MAX_E: u32 = 1024u;
const MAX_G: u32 = 64u;
const MASKED: f32 = -3.0e38;   // a group-masked expert: below every real score
// Below every score: the start of a max. Not -inf: WGSL has no infinities in constant
// expressions (Chrome's Tint rejects a bitcast one).
const LOWEST: f32 = -3.4e38;

struct Params {
    n_expert: u32,   // experts of the layer (<= 1024)
    k: u32,          // experts per token
    gating: u32,     // 0: softmax, 1: sigmoid
    flags: u32,      // bit 0: renormalise the k weights; bit 1: add the selection bias
    n_group: u32,    // expert groups (1: no group limit); n_expert % n_group == 0, <= 64
    topk_group: u32, // groups kept per token
    scale: f32,      // weights multiplier
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;       // [n_tokens, n_expert]
@group(0) @binding(1) var<storage, read> bias: array<f32>;         // [n_expert] or unused
@group(0) @binding(2) var<storage, read_write> route: array<u32>;  // [n_tokens, k, 2]: (id, bitcast weight)
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<uniform> step: Step;

var<workgroup> prob: array<f32, MAX_E>;  // weight source: softmax p or sigmoid s
var<workgroup> sel: array<f32, MAX_E>;   // selection score, or MASKED
var<workgroup> rv: array<f32, WG>;
var<workgroup> chosen: array<u32, MAX_E>;  // [k] the chosen experts, best first
var<workgroup> gscore: array<f32, MAX_G>;


// Is (v, i) better than (w, j)? Larger score, then lower id.
fn better(v: f32, i: u32, w: f32, j: u32) -> bool {
    return v > w || (v == w && i < j);
}

// Sum (or max, with `is_max`) of one value per thread, returned to all threads.
fn reduce(v: f32, lid: u32, is_max: bool) -> f32 {
    rv[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            if (is_max) {
                rv[lid] = max(rv[lid], rv[lid + s]);
            } else {
                rv[lid] += rv[lid + s];
            }
        }
        workgroupBarrier();
    }
    let r = rv[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wg.x;
    let ne = min(p.n_expert, MAX_E);
    let base = t * p.n_expert;
    let use_bias = (p.flags & 2u) != 0u;
    if (p.gating == 0u) {
        var m = LOWEST;
        for (var i = lid; i < ne; i += WG) {
            m = max(m, logits[base + i]);
        }
        m = reduce(m, lid, true);
        var s = 0.0;
        for (var i = lid; i < ne; i += WG) {
            let e = exp(logits[base + i] - m);
            prob[i] = e;
            s += e;
        }
        s = reduce(s, lid, false);
        for (var i = lid; i < ne; i += WG) {
            prob[i] = prob[i] / s;
            sel[i] = prob[i];
        }
    } else {
        for (var i = lid; i < ne; i += WG) {
            let v = 1.0 / (1.0 + exp(-logits[base + i]));
            prob[i] = v;
            sel[i] = select(v, v + bias[i], use_bias);
        }
    }
    workgroupBarrier();
    // Group limit: score each group by its two best selection scores, keep the topk_group best
    // groups (ties: lower group id), mask the experts of the others.
    let n_group = min(p.n_group, MAX_G);
    if (n_group > 1u) {
        let gsize = ne / n_group;
        if (lid < n_group) {
            var b1 = LOWEST;
            var b2 = LOWEST;
            for (var i = lid * gsize; i < (lid + 1u) * gsize; i++) {
                let v = sel[i];
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
            if (rank >= p.topk_group) {
                sel[i] = MASKED;
            }
        }
        workgroupBarrier();
    }
    // Selection by rank: an expert's rank is the number of experts `better` than it (a strict
    // order), so the k of rank < k are the chosen ones, best first at slot rank: one pass over the
    // scores in workgroup memory and one barrier, not k argmax reductions.
    let k = min(p.k, ne);
    for (var i = lid; i < ne; i += WG) {
        let v = sel[i];
        var rank = 0u;
        for (var h = 0u; h < ne && rank < k; h++) {
            if (better(sel[h], h, v, i)) {
                rank++;
            }
        }
        if (rank < k) {
            chosen[rank] = i;
        }
    }
    workgroupBarrier();
    // Thread 0 sums the picks' weights, then writes them in order with the final factor: from
    // workgroup memory and registers only (reading `route` back would be a trip to memory each).
    if (lid == 0u) {
        var wsum = 0.0;
        for (var j = 0u; j < k; j++) {
            wsum += prob[chosen[j]];
        }
        var f = p.scale;
        if ((p.flags & 1u) != 0u) {
            var d = wsum;
            if (p.gating == 1u) {
                d += 1e-20;
            }
            f = f / d;
        }
        for (var j = 0u; j < k; j++) {
            let id = chosen[j];
            route[(t * p.k + j) * 2u] = id;
            route[(t * p.k + j) * 2u + 1u] = bitcast<u32>(prob[id] * f);
        }
    }
}
