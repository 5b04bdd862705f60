// tandem:include common/wg_argmax.wgsl
//
// tokens[0] = argmax(logits[row, :]), the lowest index on ties: greedy sampling on the GPU, so
// the next pass reads its input token without a host round trip and only the id is read back.
// One workgroup of 256 threads: strided scan, then a tree reduction of (value, index) pairs.

struct Params {
    n_vocab: u32,
    row: u32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;       // [rows, n_vocab]
@group(0) @binding(1) var<storage, read_write> tokens: array<u32>; // [>= 1]
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    let base = p.row * p.n_vocab;
    var bv = -3.0e38;
    var bi = 0xffffffffu;
    for (var i = lid; i < p.n_vocab; i += 256u) {
        let v = logits[base + i];
        if (v > bv) {
            bv = v;
            bi = i;
        }
    }
    let best = wg_argmax(bv, bi, lid);
    if (lid == 0u) {
        tokens[0] = select(best.y, 0u, best.y == 0xffffffffu);
    }
}
