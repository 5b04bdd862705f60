// tandem:include common/step.wgsl
// The bindings and parameters the matrix products share (matvec.wgsl, matvec_batch.wgsl,
// matmul.wgsl): `mat()` builds one bind group for all three, so they declare it once, here.
// Include-only; matvec and matvec_batch add binding 6 (their norm prologue's weights).

struct Params {
    n_rows: u32,    // rows of this weight chunk
    n_cols: u32,    // row length (matvec: a multiple of 8; matvec_batch, matmul: of 32)
    y_stride: u32,  // floats between output rows of consecutive tokens
    y_offset: u32,  // first output column (the chunk's first row)
    flags: u32,     // bit 0: add bias; bit 1: accumulate into y; bit 2: RMSNorm prologue
                    // (matvec; matvec_batch's NORM); bit 3: GELU-tanh (matvec_batch's GLU)
    rows_mode: u32, // 0: all tokens, 1: the output rows (see common/step.wgsl)
    eps: f32,       // RMSNorm epsilon (matvec's prologue)
    // The router's shares (matvec_route.wgsl, common/route_share.wgsl; 0 elsewhere): experts,
    // the slot the dispatch adds into and the slot it clears (words into the shares).
    route_experts: u32,
    route_at: u32,
    route_clear: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;         // [n_rows, n_cols / QK] blocks
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;   // [n_tokens, n_cols]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;   // [n_tokens, y_stride]
@group(0) @binding(3) var<storage, read> bias: array<f32>;      // [y_offset + n_rows] or unused
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<uniform> step: Step;

// Writes output `row` of token t: v plus the bias (flags bit 0), added to y (bit 1). Returns
// what it wrote.
fn store_out(t: u32, row: u32, v: f32) -> f32 {
    var r = v;
    if ((p.flags & 1u) != 0u) {
        r += bias[p.y_offset + row];
    }
    let o = t * p.y_stride + p.y_offset + row;
    if ((p.flags & 2u) != 0u) {
        r += y[o];
    }
    y[o] = r;
    return r;
}
