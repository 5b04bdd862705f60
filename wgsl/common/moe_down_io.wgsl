// The parameters and bindings of moe_down.wgsl and moe_down_q8.wgsl (kernels::moe::down
// builds one bind group for either). Include-only.

struct Params {
    n_rows: u32,    // n_embd
    n_cols: u32,    // n_ff (expert FFN width)
    k: u32,
    e0: u32,
    n_exp: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;              // [n_exp, n_rows, n_cols / QK] blocks
@group(0) @binding(1) var<storage, read> h: array<vec4<f32>>;        // [k, n_cols]
@group(0) @binding(2) var<storage, read_write> x: array<f32>;        // [n_rows] the residual stream
@group(0) @binding(3) var<storage, read> route: array<u32>;          // [k, 2]: (id, bitcast weight)
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs
