// tandem:include common/step.wgsl
//
// x[t, r] += sum_j o[t * k + j, r] for the tokens of a batched pass: the routed experts' weighted
// outputs (moe_down_batch.wgsl) summed over each token's k routes in route order and added to the
// residual stream.
// Work split: one thread per (token, row), 256 per workgroup, 2-D grid.

struct Params {
    n_embd: u32,
    k: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> o: array<f32>;             // [n_tokens * k, n_embd]
@group(0) @binding(1) var<storage, read_write> x: array<f32>;       // [n_tokens, n_embd]
@group(0) @binding(2) var<uniform> p: Params;
@group(0) @binding(3) var<uniform> step: Step;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wg.x + wg.y * nwg.x) * 256u + lid;
    if (i >= step.n_tokens * p.n_embd) {
        return;
    }
    let t = i / p.n_embd;
    let r = i % p.n_embd;
    var s = 0.0;
    for (var j = 0u; j < p.k; j++) {
        s += o[(t * p.k + j) * p.n_embd + r];
    }
    x[i] += s;
}
