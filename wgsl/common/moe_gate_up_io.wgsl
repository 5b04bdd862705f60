// The parameters and bindings of moe_gate_up.wgsl and moe_gate_up_q8.wgsl (kernels::moe::gate_up
// builds one bind group for either). Include-only.

struct Params {
    n_ff: u32,      // rows per expert (expert_feed_forward_length)
    n_cols: u32,    // n_embd
    k: u32,         // routes per token
    e0: u32,        // first expert of this chunk
    n_exp: u32,     // experts in this chunk
    act: u32,       // 0: SiLU, 1: GELU (tanh)
    flags: u32,     // bit 2: RMSNorm prologue
    eps: f32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;              // [n_exp, 2, n_ff, n_cols / QK] blocks
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;        // [n_cols]
@group(0) @binding(2) var<storage, read_write> h: array<f32>;        // [k, n_ff]
@group(0) @binding(3) var<storage, read> route: array<u32>;          // [k, 2]: (id, bitcast weight)
@group(0) @binding(4) var<storage, read> norm_w: array<vec4<f32>>;   // [n_cols] or unused
@group(0) @binding(5) var<uniform> p: Params;
@group(0) @binding(6) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs
