// tandem:include common/step.wgsl
//
// The tokens routed to each expert, for the batched expert kernels (passes of more than one
// token): from the routes [n_tokens, k] it writes
//   lists[0 .. n_expert]              offsets: expert e's slots are lists[HEAD + off[e] .. off[e+1]]
//   lists[HEAD ..  HEAD + n_tokens k] route slots s = t * k + j, grouped by expert, t ascending
// with HEAD = n_expert + 1. The order is fixed (no atomics), so results do not depend on timing.
// Work split: one workgroup of 256 threads; thread i counts and then lists experts i, i + 256, ...
// by scanning all routes, staged CHUNK at a time in workgroup memory (every thread reads the same
// id at once, a broadcast: scanning them from global memory, one load after another, took a
// 512-token pass of the 30B MoE 0.33 ms a layer); thread 0 makes the prefix sum of the counts.

const WG: u32 = 256u;
const MAX_E: u32 = 1024u;
const CHUNK: u32 = 2048u;

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
var<workgroup> ids: array<u32, CHUNK>;   // the expert ids of routes c0 .. c0 + CHUNK

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    let ne = min(p.n_expert, MAX_E);
    let n = step.n_tokens * p.k;
    for (var e = lid; e < ne; e += WG) {
        counts[e] = 0u;
    }
    for (var c0 = 0u; c0 < n; c0 += CHUNK) {
        let m = stage_ids(lid, c0, n);
        for (var e = lid; e < ne; e += WG) {
            var c = 0u;
            for (var s = 0u; s < m; s++) {
                c += select(0u, 1u, ids[s] == e);
            }
            counts[e] += c;
        }
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
    let head = ne + 1u;
    for (var c0 = 0u; c0 < n; c0 += CHUNK) {
        let m = stage_ids(lid, c0, n);
        for (var e = lid; e < ne; e += WG) {
            var o = head + counts[e];
            for (var s = 0u; s < m; s++) {
                if (ids[s] == e) {
                    lists[o] = c0 + s;
                    o++;
                }
            }
            counts[e] = o - head;
        }
    }
}

// Stages the expert ids of routes c0 .. into `ids` (after a barrier: the last chunk's reads are
// done); returns how many.
fn stage_ids(lid: u32, c0: u32, n: u32) -> u32 {
    let m = min(CHUNK, n - c0);
    workgroupBarrier();
    for (var i = lid; i < m; i += WG) {
        ids[i] = route[(c0 + i) * 2u];
    }
    workgroupBarrier();
    return m;
}
