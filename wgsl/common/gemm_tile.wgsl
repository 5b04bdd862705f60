// Workgroup-memory tiles of the register-blocked batch kernels (matmul.wgsl, moe_gate_up_batch.wgsl,
// moe_down_batch.wgsl): each k step of 32 columns stages 64 weight rows in `ws` and 64 tokens'
// activations in `xs`, both k-major as vec4s of 4 rows (tokens) a column: 512 vec4 (8 KiB)
// each, 16 KiB together. A thread then multiplies one vec4 of each per column into its 4x4
// block (`tile_mul`: 2 loads, 16 FMAs a column).
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

// A thread's 4x4 block of outputs: c<j> holds token 4 tt + j of rows 4 tr .. 4 tr + 3 (for
// moe_gate_up_batch: gate and up of two rows). Four named vec4s, not an array, so they stay in
// registers.
struct Block4 {
    c0: vec4<f32>,
    c1: vec4<f32>,
    c2: vec4<f32>,
    c3: vec4<f32>,
}

// acc + (the tile's rows of group tr) x (its tokens of group tt) over the 32 columns staged.
fn tile_mul(acc: Block4, tr: u32, tt: u32) -> Block4 {
    var r = acc;
    for (var kk = 0u; kk < 32u; kk++) {
        let a = ws[slot(kk, tr)];
        let b = xs[slot(kk, tt)];
        r.c0 = fma(a, vec4<f32>(b.x), r.c0);
        r.c1 = fma(a, vec4<f32>(b.y), r.c1);
        r.c2 = fma(a, vec4<f32>(b.z), r.c2);
        r.c3 = fma(a, vec4<f32>(b.w), r.c3);
    }
    return r;
}
