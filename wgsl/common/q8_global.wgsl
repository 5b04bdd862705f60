// tandem:include common/q8_dot.wgsl
// tandem:include common/q8_layout.wgsl
// x' quantized to int8 (common/q8_dot.wgsl) once for the whole pass by quantize_q8.wgsl (or, for
// the attention output, by attention_combine.wgsl), read from global memory by the small-batch
// matrix product (matvec_batch_q8.wgsl): with no staging there is no barrier between the weight
// loads, and each workgroup reads only the columns its units need. A row is laid out as
// common/q8_layout.wgsl says. The units (common/unit_q8.wgsl) read it through x16, x_d and x_sum,
// the products' epilogue x_scale, for token t = row x_row0 + t. Include-only; the includer has
// `p.n_cols` and binding 8, `xq`.

@group(0) @binding(8) var<storage, read> xq: array<vec4<u32>>;

// The first row the includer's token 0 is (its group of tokens).
var<private> x_row0: u32;

// Entry e (values 16 e .. + 16) of token t.
fn x16(t: u32, e: u32) -> X16 {
    let i = (x_row0 + t) * q8_row_len(p.n_cols) + 2u * e;
    return X16(xq[i], xq[i + 1u]);
}

// The unit (d / 254) of block s of token t.
fn x_d(t: u32, s: u32) -> f32 {
    let v = xq[(x_row0 + t) * q8_row_len(p.n_cols) + q8_units_at(p.n_cols) + s / 4u];
    return bitcast<f32>(v[s % 4u]);
}

// The sum of entry e of token t in units of d / 254, as quantize_q8.wgsl computed it.
fn x_sum(t: u32, e: u32) -> f32 {
    let v = xq[(x_row0 + t) * q8_row_len(p.n_cols) + q8_sums_at(p.n_cols) + e / 4u];
    return bitcast<f32>(v[e % 4u]);
}

// The scale token t's products are multiplied by.
fn x_scale(t: u32) -> f32 {
    return bitcast<f32>(xq[(x_row0 + t) * q8_row_len(p.n_cols) + q8_scale_at(p.n_cols)].x);
}
