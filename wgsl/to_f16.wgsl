// tandem:include common/step.wgsl
// tandem:coop
//
// xh = the pass's rows of x as f16, for the matrix products on the matrix units
// (matmul_coop.wgsl). They round x to f16 anyway, and each of their 64-row tiles reads all of
// x: converted once here, the tiles load half the bytes and hold half the registers for the
// next step's activations. One thread a vec4, workgroups laid out 2-D.

struct Params {
    n_cols: u32,    // a multiple of 4
    rows_mode: u32, // 0: all tokens, 1: the output rows (see common/step.wgsl)
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;          // [rows, n_cols]
@group(0) @binding(1) var<storage, read_write> xh: array<vec4<f16>>;   // [rows, n_cols]
@group(0) @binding(2) var<uniform> p: Params;
@group(0) @binding(3) var<uniform> step: Step;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= step_rows(step, p.rows_mode) * (p.n_cols / 4u)) {
        return;
    }
    xh[i] = vec4<f16>(x[i]);
}
