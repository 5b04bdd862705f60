// tandem:include common/q8_dot.wgsl
// x' quantized to int8 (common/q8_dot.wgsl) once for the whole pass by quantize_q8.wgsl, read from
// global memory by the small-batch matrix product (matvec_batch_q8.wgsl): with no staging there
// is no barrier between the weight loads, and each workgroup reads only the columns its units
// need. A row of n_cols values is n_cols / 8 vec4s of entries (16 values each: the quotients'
// vec4, then the remainders'), then ceil(n_cols / 128) vec4s of the blocks' units (d / 254), then
// ceil(n_cols / 64) vec4s of the entries' sums (sum16, in those units), both f32 bits four a vec4,
// then one vec4 whose x is the row's scale (the norm's; 1 without): q8_row_len. The units
// (common/unit_q8.wgsl) read it through x16, x_d and x_sum, the products' epilogue x_scale, for
// token t = row x_row0 + t. Include-only; the includer has `p.n_cols` and binding 8, `xq`.

@group(0) @binding(8) var<storage, read> xq: array<vec4<u32>>;

// The first row the includer's token 0 is (its group of tokens).
var<private> x_row0: u32;

// vec4s of one row of n_cols values.
fn q8_row_len(n_cols: u32) -> u32 {
    return q8_sums_at(n_cols) + (n_cols + 63u) / 64u + 1u;
}

// Where a row's entry sums start.
fn q8_sums_at(n_cols: u32) -> u32 {
    return n_cols / 8u + (n_cols + 127u) / 128u;
}

// Entry e (values 16 e .. + 16) of token t.
fn x16(t: u32, e: u32) -> X16 {
    let i = (x_row0 + t) * q8_row_len(p.n_cols) + 2u * e;
    return X16(xq[i], xq[i + 1u]);
}

// The unit (d / 254) of block s of token t.
fn x_d(t: u32, s: u32) -> f32 {
    let v = xq[(x_row0 + t) * q8_row_len(p.n_cols) + p.n_cols / 8u + s / 4u];
    return bitcast<f32>(v[s % 4u]);
}

// The sum of entry e of token t in units of d / 254, as quantize_q8.wgsl computed it.
fn x_sum(t: u32, e: u32) -> f32 {
    let v = xq[(x_row0 + t) * q8_row_len(p.n_cols) + q8_sums_at(p.n_cols) + e / 4u];
    return bitcast<f32>(v[e % 4u]);
}

// The scale token t's products are multiplied by.
fn x_scale(t: u32) -> f32 {
    let len = q8_row_len(p.n_cols);
    return bitcast<f32>(xq[(x_row0 + t) * len + len - 1u].x);
}
