// The parameters and bindings of matvec_glu.wgsl and matvec_glu_q8.wgsl (kernels::matvec_glu
// builds one bind group for either). Include-only.

struct Params {
    n_rows: u32,    // output rows (the FFN width); the weight has 2 * n_rows
    n_cols: u32,
    act: u32,       // 0: SiLU, 1: GELU (tanh)
    flags: u32,     // bit 2: RMSNorm prologue
    eps: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;              // [2 * n_rows, n_cols / QK] blocks
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;        // [n_cols]
@group(0) @binding(2) var<storage, read_write> h: array<f32>;        // [n_rows]
@group(0) @binding(3) var<storage, read> norm_w: array<vec4<f32>>;   // [n_cols] or unused
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs
