// tandem:include common/wg_argmax.wgsl
//
// Greedy sampling, stage 2 of 2: tokens[0] = the best of the slice winners of argmax.wgsl, so
// tokens[0] = argmax(logits[row, :]) with the lowest id on ties; greedy sampling on the GPU lets
// the next pass read its input token without a host round trip, and only the id is read back.
// One workgroup of 256 threads: thread lid takes winners lid, lid + 256, ... (slices in order, so
// a strict comparison keeps the lowest id), then a tree reduction. A row with nothing above -3e38
// (all -inf or NaN, or empty) gives token 0.

struct Params {
    n_vocab: u32,
    row: u32,
    _pad0: u32,
    _pad1: u32,
}

override SLICE: u32 = 1024u;  // as in argmax.wgsl (kernels::ARGMAX_SLICE)
const NEG: f32 = -3.0e38;

@group(0) @binding(0) var<storage, read> partial: array<vec2<u32>>;  // [ceil(n_vocab / SLICE)] (f32 bits, id)
@group(0) @binding(1) var<storage, read_write> tokens: array<u32>;   // [>= 1]
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    let n_groups = (p.n_vocab + SLICE - 1u) / SLICE;
    var bv = NEG;
    var bi = 0xffffffffu;
    for (var g = lid; g < n_groups; g += 256u) {
        let w = partial[g];
        let v = bitcast<f32>(w.x);
        if (v > bv) {
            bv = v;
            bi = w.y;
        }
    }
    let best = wg_argmax(bv, bi, lid);
    if (lid == 0u) {
        tokens[0] = select(best.y, 0u, best.y == 0xffffffffu);
    }
}
