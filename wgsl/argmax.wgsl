// tandem:include common/wg_argmax.wgsl
//
// Greedy sampling, stage 1 of 2: each workgroup's argmax over its slice of one row of logits,
// for each of the pass's n_out rows (one for a decode step, n + 1 for a speculative verification).
// A row is cut into slices of SLICE logits, one workgroup each (one workgroup over the whole row
// cannot pull memory fast enough; bench/RESULTS.md), and argmax_combine.wgsl reduces the slices'
// winners.
// Workgroup (g, r), 256 threads: thread lid reads row r at g * SLICE + lid + 256 k (coalesced; the index is
// clamped so every load is unconditional and all of them can be in flight at once), keeps its
// best, and a tree reduction picks the workgroup's. NaN never wins (comparisons with it are
// false); a slice with nothing above -3e38 writes id 0xffffffff. The lowest id wins ties.

struct Params {
    n_vocab: u32,
    n_groups: u32,  // slices a row is cut into
    _pad0: u32,
    _pad1: u32,
}

override SLICE: u32 = 1024u;  // logits per workgroup, a multiple of 256 (kernels::ARGMAX_SLICE)
const NEG: f32 = -3.0e38;

@group(0) @binding(0) var<storage, read> logits: array<f32>;               // [n_out, n_vocab]
@group(0) @binding(1) var<storage, read_write> partial: array<vec2<u32>>;  // [n_out, n_groups] (f32 bits, id)
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let base = wg.y * p.n_vocab;
    let last = max(p.n_vocab, 1u) - 1u;
    var bv = NEG;
    var bi = 0xffffffffu;
    for (var k = 0u; k < SLICE / 256u; k++) {
        let i = wg.x * SLICE + lid + 256u * k;
        let v = select(NEG, logits[base + min(i, last)], i < p.n_vocab);
        if (v > bv) {
            bv = v;
            bi = i;
        }
    }
    let best = wg_argmax(bv, bi, lid);
    if (lid == 0u) {
        partial[wg.y * p.n_groups + wg.x] = best;
    }
}
