// tandem:include common/step.wgsl
//
// The tokens routed to each expert, for the batched expert kernels (passes of more than one
// token): from the routes [n_tokens, k] it writes
//   lists[0 .. n_expert]              offsets: expert e's slots are lists[HEAD + off[e] .. off[e+1]]
//   lists[HEAD ..  HEAD + n_tokens k] route slots s = t * k + j, grouped by expert, t ascending
// with HEAD = n_expert + 1. The order is fixed, so results do not depend on timing: the atomics
// below only count and set bits, whose results do not depend on the order they run in.
// Work split: one workgroup of 256 threads. The experts' counts (an atomic add a route), their
// prefix sum (thread 0), then the routes placed TB tokens at a time: each expert gets a mask of
// the chunk's tokens routed to it (an atomic or a route), and a route's slot is its expert's
// base plus the tokens before it in that mask. A token's k routes name k distinct experts (the
// router's top k), so a token sets one bit in a mask once. Scanning every route once per expert
// instead took a 512-token pass of the 30B MoE 0.3 ms a layer.

const WG: u32 = 256u;
const MAX_E: u32 = 1024u;
const TB: u32 = 32u;   // tokens a chunk: one bit each in an expert's mask

struct Params {
    n_expert: u32,
    k: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> route: array<u32>;          // [n_tokens, k, 2]: (id, bitcast weight)
@group(0) @binding(1) var<storage, read_write> lists: array<u32>;    // [n_expert + 1 + n_tokens * k]
@group(0) @binding(2) var<uniform> p: Params;
@group(0) @binding(3) var<uniform> step: Step;

var<workgroup> counts: array<atomic<u32>, MAX_E>;
var<workgroup> masks: array<atomic<u32>, MAX_E>;   // the current chunk's tokens routed to each expert
var<workgroup> base: array<u32, MAX_E>;            // each expert's next slot, past its earlier chunks

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    let ne = min(p.n_expert, MAX_E);
    let k = p.k;
    let n_tok = step.n_tokens;
    for (var e = lid; e < ne; e += WG) {
        atomicStore(&counts[e], 0u);
        atomicStore(&masks[e], 0u);
    }
    workgroupBarrier();
    for (var s = lid; s < n_tok * k; s += WG) {
        atomicAdd(&counts[expert(s, ne)], 1u);
    }
    workgroupBarrier();
    if (lid == 0u) {
        var off = 0u;
        for (var e = 0u; e < ne; e++) {
            base[e] = off;
            lists[e] = off;
            off += atomicLoad(&counts[e]);
        }
        lists[ne] = off;
    }
    workgroupBarrier();
    let head = ne + 1u;
    for (var t0 = 0u; t0 < n_tok; t0 += TB) {
        let m = min(TB, n_tok - t0) * k;
        let s0 = t0 * k;
        for (var i = lid; i < m; i += WG) {
            atomicOr(&masks[expert(s0 + i, ne)], 1u << (i / k));
        }
        workgroupBarrier();
        for (var i = lid; i < m; i += WG) {
            let e = expert(s0 + i, ne);
            let before = atomicLoad(&masks[e]) & ((1u << (i / k)) - 1u);
            lists[head + base[e] + countOneBits(before)] = s0 + i;
        }
        workgroupBarrier();
        for (var e = lid; e < ne; e += WG) {
            base[e] += countOneBits(atomicExchange(&masks[e], 0u));
        }
        workgroupBarrier();
    }
}

// Route slot s's expert.
fn expert(s: u32, ne: u32) -> u32 {
    return min(route[s * 2u], ne - 1u);
}
