// tandem:include common/step.wgsl
//
// The tokens routed to each expert, for the batched expert kernels (passes of more than one
// token): from the routes [n_tokens, k] it writes
//   lists[0 .. n_expert]              offsets: expert e's slots are lists[HEAD + off[e] .. off[e+1]]
//   lists[HEAD ..  HEAD + n_tokens k] route slots s = t * k + j, grouped by expert, t ascending
// with HEAD = n_expert + 1. The order is fixed (no atomics), so results do not depend on timing.
// Work split: one workgroup of 256 threads; thread i counts and then lists experts i, i + 256, ...
// by scanning all routes (n_tokens * k <= a few thousand, read from cache); thread 0 makes the
// prefix sum of the counts.

const WG: u32 = 256u;
const MAX_E: u32 = 1024u;

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

var<workgroup> counts: array<u32, MAX_E>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    let ne = min(p.n_expert, MAX_E);
    let n = step.n_tokens * p.k;
    for (var e = lid; e < ne; e += WG) {
        var c = 0u;
        for (var s = 0u; s < n; s++) {
            c += select(0u, 1u, route[s * 2u] == e);
        }
        counts[e] = c;
    }
    workgroupBarrier();
    if (lid == 0u) {
        var off = 0u;
        for (var e = 0u; e < ne; e++) {
            let c = counts[e];
            counts[e] = off;
            lists[e] = off;
            off += c;
        }
        lists[ne] = off;
    }
    workgroupBarrier();
    let head = ne + 1u;
    for (var e = lid; e < ne; e += WG) {
        var o = head + counts[e];
        for (var s = 0u; s < n; s++) {
            if (route[s * 2u] == e) {
                lists[o] = s;
                o++;
            }
        }
    }
}
