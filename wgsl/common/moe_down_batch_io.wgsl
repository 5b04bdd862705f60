// The parameters and bindings of the experts' batched down product, which moe_down_batch.wgsl
// and moe_down_batch_coop.wgsl share (one bind group, `moe.rs`'s DownBatchParams); each declares
// h (binding 1) itself: the matrix units' twin reads it as f16. Include-only.

struct Params {
    n_rows: u32,    // n_embd
    n_cols: u32,    // n_ff, a multiple of 32
    k: u32,
    e0: u32,
    n_exp: u32,
    n_expert: u32,  // all experts of the layer (the lists' header)
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;              // [n_exp, n_rows, n_cols / QK] blocks
@group(0) @binding(2) var<storage, read_write> o: array<f32>;        // [n_tokens * k, n_rows]
@group(0) @binding(3) var<storage, read> lists: array<u32>;          // moe_sort.wgsl's output
@group(0) @binding(4) var<storage, read> route: array<u32>;          // [n_tokens * k, 2]
@group(0) @binding(5) var<uniform> p: Params;
