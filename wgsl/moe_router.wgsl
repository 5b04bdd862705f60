// tandem:include common/step.wgsl
// tandem:include common/route.wgsl
//
// Mixture-of-Experts routing of every token of a pass, from the router logits (a normal
// matvec/matmul of ffn_gate_inp) to its k experts and their weights, on the GPU
// (common/route.wgsl has the rules).
// Work split: one workgroup of 256 threads per token; thread i holds experts i, i + 256, ...
// and ranks them against all the others.

const WG: u32 = 256u;
const MAX_E: u32 = 1024u;

@group(0) @binding(0) var<storage, read> logits: array<f32>;       // [n_tokens, n_expert]
@group(0) @binding(1) var<storage, read> bias: array<f32>;         // [n_expert] or unused
@group(0) @binding(2) var<storage, read_write> route: array<u32>;  // [n_tokens, k, 2]: (id, bitcast weight)
@group(0) @binding(3) var<uniform> p: RouteParams;
@group(0) @binding(4) var<uniform> step: Step;

fn logit_of(t: u32, e: u32) -> f32 {
    return logits[t * p.n_expert + e];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wg.x;
    let k = route_token(p, t, lid);
    // Thread 0 writes the picks in order with their weights: from workgroup memory and
    // registers only (reading `route` back would be a trip to memory each).
    if (lid == 0u) {
        let f = route_factor(p, k);
        for (var j = 0u; j < k; j++) {
            route[(t * p.k + j) * 2u] = chosen[j];
            route[(t * p.k + j) * 2u + 1u] = bitcast<u32>(route_source(p, j) * f);
        }
    }
}
