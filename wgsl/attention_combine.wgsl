// tandem:include common/step.wgsl
// tandem:include common/attn_merge.wgsl
//
// Merges the n_split partial results of attention.wgsl for each (head, token)
// (common/attn_merge.wgsl). Grid (n_head, n_tokens), 256 threads.

struct Params {
    n_head: u32,
    head_dim: u32,  // = HD
    _pad0: u32,
    _pad1: u32,
}

override HD: u32 = 64u;
override HD4: u32 = HD / 4u;

@group(0) @binding(0) var<storage, read> partial: array<vec4<f32>>;    // [n_tokens, n_head, n_split, 1 + HD / 4]
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;  // [n_tokens, n_head, HD / 4]
@group(0) @binding(2) var<uniform> p: Params;
@group(0) @binding(3) var<uniform> step: Step;

fn part_at(i: u32) -> vec4<f32> {
    return partial[i];
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t = wg.y;
    if (t >= step.n_tokens) {
        return;
    }
    let n_split = step.attn_splits;
    let base = (t * p.n_head + h) * n_split * (HD4 + 1u);
    let o = merge_parts(lid, base, n_split);
    if (lid < HD4) {
        out[(t * p.n_head + h) * HD4 + lid] = o;
    }
}
