// The matvecs' bindings past the matrix products' (common/mat_io.wgsl): binding 6, the norm
// prologue's weights, and binding 7, the weights again as 16-byte runs for the units' wide
// loads. Include-only.

@group(0) @binding(6) var<storage, read> norm_w: array<vec4<f32>>;  // [n_cols] or unused
@group(0) @binding(7) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs
