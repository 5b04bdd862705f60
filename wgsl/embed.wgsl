// tandem:include common/bits.wgsl
// tandem:include common/step.wgsl
// tandem:per-qtype
//
// y[t, :] = scale * table[tokens[t], :] for every token of the pass: the embedding row lookup,
// dequantizing the table's blocks. One workgroup per token; threads stride over 8-element units.
// A table split by rows into chunks runs once per chunk; each run writes the tokens it holds.

struct Params {
    dim: u32,       // row length, a multiple of 8
    n_rows: u32,    // rows in this chunk
    row0: u32,      // first token id in this chunk
    scale: f32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;         // [n_rows, dim / QK] blocks
@group(0) @binding(1) var<storage, read> tokens: array<u32>;    // [n_tokens]
@group(0) @binding(2) var<storage, read_write> y: array<vec4<f32>>;  // [n_tokens, dim]
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<uniform> step: Step;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wg.x;
    if (t >= step.n_tokens) {
        return;
    }
    let id = tokens[t];
    if (id < p.row0 || id >= p.row0 + p.n_rows) {
        return;
    }
    let row = id - p.row0;
    let blocks_per_row = p.dim / QK;
    for (var u = lid; u < p.dim / 8u; u += 64u) {
        let k = u * 8u;
        let v = dequant8(row * blocks_per_row + k / QK, (k % QK) / 8u);
        let o = (t * p.dim + k) / 4u;
        y[o] = v[0] * p.scale;
        y[o + 1u] = v[1] * p.scale;
    }
}
