// Workgroup-memory tiles of the register-blocked batch kernels (matmul.wgsl, moe_gate_up_batch.wgsl,
// moe_down_batch.wgsl): each k step of 32 columns stages 64 weight rows in `ws` and 64 tokens'
// activations in `xs`, both k-major as vec4s of 4 rows (tokens) a column: 512 vec4 (8 KiB)
// each, 16 KiB together. A thread then multiplies one vec4 of each per column into a 4x4 block
// of vec4 registers (the includer's inner loop: 2 loads, 16 FMAs). Each includer writes that loop
// out itself: as a shared function returning the block as a struct, prefill measured slower on
// an H200 (bench/RESULTS.md, sixth session).
// Slot swizzle: the vec4 of group g (rows or tokens 4g..4g+3) at column kk sits at
// kk * 16 + (g ^ (kk / 4)), so the scalar stores of the staging fall in distinct banks (a
// warp's 8 rows x 4 units, or 4 tokens x 8 column quads) while the inner loop's loads stay a
// permutation within one column.
// Include-only; the includer declares `var<workgroup> ws: array<vec4<f32>, 512>` and
// `var<workgroup> xs: array<vec4<f32>, 512>`.

// The slot of the vec4 of group g at tile column kk (0..31).
fn slot(kk: u32, g: u32) -> u32 {
    return kk * 16u + (g ^ (kk >> 2u));
}

// Stores the unit of 8 weights (columns 8 wu .. 8 wu + 7 of the k step) of the tile row held at
// component c of group g.
fn stage_w8(g: u32, c: u32, wu: u32, v0: vec4<f32>, v1: vec4<f32>) {
    let k = wu * 8u;
    ws[slot(k, g)][c] = v0.x;
    ws[slot(k + 1u, g)][c] = v0.y;
    ws[slot(k + 2u, g)][c] = v0.z;
    ws[slot(k + 3u, g)][c] = v0.w;
    ws[slot(k + 4u, g)][c] = v1.x;
    ws[slot(k + 5u, g)][c] = v1.y;
    ws[slot(k + 6u, g)][c] = v1.z;
    ws[slot(k + 7u, g)][c] = v1.w;
}

// Stores 4 activations (columns 4 q .. 4 q + 3 of the k step) of tile token t.
fn stage_x4(t: u32, q: u32, v: vec4<f32>) {
    let k = q * 4u;
    let g = t / 4u;
    let c = t % 4u;
    xs[slot(k, g)][c] = v.x;
    xs[slot(k + 1u, g)][c] = v.y;
    xs[slot(k + 2u, g)][c] = v.z;
    xs[slot(k + 3u, g)][c] = v.w;
}
