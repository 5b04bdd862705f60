// x' as two int8 planes in blocks of 32 with one f32 scale d each, and its dot product with
// int8 weights by dot4I8Packed (four multiply-adds an instruction): the arithmetic shared by the
// `_q8` matrix products, whether they stage x' in workgroup memory (common/q8_stage.wgsl) or read
// it quantized once for the pass (quantize_q8.wgsl, common/q8_global.wgsl). x' = d (q + r / 254):
// q = round(x' / d) with d = max |x'| / 127 (GGML's Q8_0), and r the remainder's int8 at a 254th
// of the step, so x' keeps about 15 bits (its error is at most d / 508: one int8 plane alone,
// llama.cpp's Q8_1, moved a real model's logits by 0.14, the two by under the f32 kernels'
// tolerance). Include-only.

// 16 values of x' as quotients and remainders, four int8 a word.
struct X16 {
    q: vec4<u32>,
    r: vec4<u32>,
}

// sum_k w_k x'_k for 16 weights w given as int8 (four a word), in units of the block's d / 254.
fn dot16(w: vec4<u32>, x: X16) -> i32 {
    let q = dot4I8Packed(w.x, x.q.x) + dot4I8Packed(w.y, x.q.y) + dot4I8Packed(w.z, x.q.z)
          + dot4I8Packed(w.w, x.q.w);
    let r = dot4I8Packed(w.x, x.r.x) + dot4I8Packed(w.y, x.r.y) + dot4I8Packed(w.z, x.r.z)
          + dot4I8Packed(w.w, x.r.w);
    return 254 * q + r;
}

// sum_k x'_k over 16 values, in units of d / 254.
fn sum16(x: X16) -> i32 {
    return dot16(vec4<u32>(0x01010101u), x);
}

// The scale d of a block of 32 values whose largest magnitudes per lane are amax.
fn q8_scale(amax: vec4<f32>) -> f32 {
    return max(max(amax.x, amax.y), max(amax.z, amax.w)) / 127.0;
}

// 1 / d for a block's scale d; 0 for a block of zeros.
fn q8_inv(d: f32) -> f32 {
    return select(0.0, 1.0 / d, d > 0.0);
}

// The quotients of v / d (word x) and their remainders (word y), four int8 each.
fn pack4_q8(v: vec4<f32>, d: f32, inv_d: f32) -> vec2<u32> {
    let q = round(v * inv_d);
    let r = round((v - q * d) * (254.0 * inv_d));
    return vec2<u32>(pack4xI8(vec4<i32>(q)), pack4xI8(vec4<i32>(r)));
}

// The sum of the four values of pack4_q8's words, in units of d / 254.
fn sum4_q8(w: vec2<u32>) -> i32 {
    return 254 * dot4I8Packed(w.x, 0x01010101u) + dot4I8Packed(w.y, 0x01010101u);
}

// The 32 values v of a block with scale d as the two halves of 16 (lo: v[0..4], hi: v[4..8]).
fn quantize_block(v: array<vec4<f32>, 8>, d: f32) -> array<X16, 2> {
    let inv_d = q8_inv(d);
    var out: array<X16, 2>;
    for (var h = 0u; h < 2u; h++) {
        let a = pack4_q8(v[4u * h], d, inv_d);
        let b = pack4_q8(v[4u * h + 1u], d, inv_d);
        let c = pack4_q8(v[4u * h + 2u], d, inv_d);
        let e = pack4_q8(v[4u * h + 3u], d, inv_d);
        out[h] = X16(vec4<u32>(a.x, b.x, c.x, e.x), vec4<u32>(a.y, b.y, c.y, e.y));
    }
    return out;
}
