// tandem:include common/wg_argmax.wgsl
//
// Greedy sampling, stage 2 of 2: tokens[r] = the best of row r's slice winners of argmax.wgsl,
// so tokens[r] = argmax(logits[r, :]) with the lowest id on ties; greedy sampling on the GPU lets
// the next pass read its input token without a host round trip, and only the ids are read back.
// One workgroup of 256 threads per row r: thread lid takes winners lid, lid + 256, ... (slices in
// order, so a strict comparison keeps the lowest id), then a tree reduction. A row with nothing
// above -3e38 (all -inf or NaN, or empty) gives token 0.

struct Params {
    n_vocab: u32,
    n_groups: u32,  // slices a row is cut into
    _pad0: u32,
    _pad1: u32,
}

override SLICE: u32 = 1024u;  // as in argmax.wgsl (kernels::ARGMAX_SLICE)
const NEG: f32 = -3.0e38;

@group(0) @binding(0) var<storage, read> partial: array<vec2<u32>>;  // [n_out, n_groups] (f32 bits, id)
@group(0) @binding(1) var<storage, read_write> tokens: array<u32>;   // [>= n_out]
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var bv = NEG;
    var bi = 0xffffffffu;
    for (var g = lid; g < p.n_groups; g += 256u) {
        let w = partial[wg.x * p.n_groups + g];
        let v = bitcast<f32>(w.x);
        if (v > bv) {
            bv = v;
            bi = w.y;
        }
    }
    let best = wg_argmax(bv, bi, lid);
    if (lid == 0u) {
        tokens[wg.x] = select(best.y, 0u, best.y == 0xffffffffu);
    }
}
