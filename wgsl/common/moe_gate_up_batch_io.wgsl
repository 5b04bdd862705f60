// The parameters and bindings of the experts' batched gate/up product, which
// moe_gate_up_batch.wgsl and moe_gate_up_batch_coop.wgsl share (one bind group, `moe.rs`'s
// GateUpBatchParams); each declares h (binding 2) itself: the matrix units' twin writes it as
// f16, for moe_down_batch_coop.wgsl. Include-only.

struct Params {
    n_ff: u32,
    n_cols: u32,    // n_embd, a multiple of 32
    k: u32,
    e0: u32,
    n_exp: u32,
    act: u32,
    n_expert: u32,  // all experts of the layer (the lists' header)
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;              // [n_exp, 2, n_ff, n_cols / QK] blocks
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;        // [n_tokens, n_cols]
@group(0) @binding(3) var<storage, read> lists: array<u32>;          // moe_sort.wgsl's output
@group(0) @binding(4) var<uniform> p: Params;
