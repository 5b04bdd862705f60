// tandem:include common/step.wgsl
// tandem:include common/act.wgsl
//
// h[t, i] = act(gate[t, i]) * up[t, i], the gated activation of SwiGLU (act = SiLU) and GeGLU
// (act = GELU, tanh approximation). Gate and up may be one stacked buffer [n_tokens, 2n] (bound
// twice, up at column n) or two. One thread per element, workgroups laid out 2-D.

struct Params {
    n: u32,          // elements per token
    act: u32,        // 0: SiLU, 1: GELU (tanh)
    stride: u32,     // floats between tokens in gate and up
    up_offset: u32,  // column of up's first element
}

@group(0) @binding(0) var<storage, read> gate: array<f32>;      // [n_tokens, stride]
@group(0) @binding(1) var<storage, read> up: array<f32>;        // [n_tokens, stride]
@group(0) @binding(2) var<storage, read_write> h: array<f32>;   // [n_tokens, n]
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<uniform> step: Step;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= step.n_tokens * p.n) {
        return;
    }
    let t = i / p.n;
    let c = i % p.n;
    let g = gate[t * p.stride + c];
    h[i] = glu_act(g, p.act) * up[t * p.stride + p.up_offset + c];
}
