// The layout of a row of x' quantized for the pass (written by quantize_q8.wgsl and by
// attention_combine.wgsl's `Q8` variant, read by common/q8_global.wgsl), in vec4s: n_cols / 8
// vec4s of entries (16 values each: the quotients' vec4, then the remainders'), then
// ceil(n_cols / 128) vec4s of the blocks' units (d / 254, four a vec4), then ceil(n_cols / 64)
// vec4s of the entries' sums (four a vec4), then one vec4 whose x is the row's scale (the norm's;
// 1 without). Padding is zero. Include-only.

// vec4s of one row of n_cols values.
fn q8_row_len(n_cols: u32) -> u32 {
    return q8_scale_at(n_cols) + 1u;
}

// Where a row's block units start.
fn q8_units_at(n_cols: u32) -> u32 {
    return n_cols / 8u;
}

// Where a row's entry sums start.
fn q8_sums_at(n_cols: u32) -> u32 {
    return q8_units_at(n_cols) + (n_cols + 127u) / 128u;
}

// Where a row's scale is.
fn q8_scale_at(n_cols: u32) -> u32 {
    return q8_sums_at(n_cols) + (n_cols + 63u) / 64u;
}
