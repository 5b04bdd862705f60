// x' staged in workgroup memory as two int8 planes, blocks of 32 with one f32 scale d each, for
// the kernels that dot it with quantized weights by dot4I8Packed (the `_q8` matrix products,
// common/unit_q8.wgsl): four multiply-adds an instruction, and x' read from global memory once
// per workgroup instead of once per group of rows. x' = d (q + r / 254): q = round(x' / d) with
// d = max |x'| / 127 (GGML's Q8_0), and r the remainder's int8 at a 254th of the step, so x'
// keeps about 15 bits (its error is at most d / 508: one int8 plane alone, llama.cpp's Q8_1,
// moved a real model's logits by 0.14, the two by under the f32 kernels' tolerance).
// Columns are staged Q8_CHUNK at a time for up to Q8_TOKENS tokens; both are constants of the
// includer (Q8_CHUNK a multiple of 256, so chunks hold whole blocks of every K-quant).
// Include-only; the includer has WG, `p.n_cols`, `fn xv(i: u32) -> vec4<f32>`, x' at vec4 i of
// its x (with the norm prologue: common/rms_fold.wgsl, which sums x^2 over these calls), and
// `fn x_row(t: u32) -> u32`, the row of x that staged token t is.

// Entries of one plane; the remainders' plane follows the quotients'.
const Q8_PLANE: u32 = Q8_TOKENS * Q8_CHUNK / 16u;

var<workgroup> xq: array<vec4<u32>, 2u * Q8_PLANE>;  // 16 int8 an entry
var<workgroup> xd: array<f32, Q8_TOKENS * Q8_CHUNK / 32u>;  // each block's d / 254

// Entries e of both planes: 16 values of x' as quotients and remainders.
struct X16 {
    q: vec4<u32>,
    r: vec4<u32>,
}

fn x16(e: u32) -> X16 {
    return X16(xq[e], xq[e + Q8_PLANE]);
}

// sum_k w_k x'_k for 16 weights w given as int8 (four a word), in units of the block's d / 254.
fn dot16(w: vec4<u32>, x: X16) -> i32 {
    let q = dot4I8Packed(w.x, x.q.x) + dot4I8Packed(w.y, x.q.y) + dot4I8Packed(w.z, x.q.z)
          + dot4I8Packed(w.w, x.q.w);
    let r = dot4I8Packed(w.x, x.r.x) + dot4I8Packed(w.y, x.r.y) + dot4I8Packed(w.z, x.r.z)
          + dot4I8Packed(w.w, x.r.w);
    return 254 * q + r;
}

// sum_k x'_k over an entry, in units of d / 254.
fn sum16(x: X16) -> i32 {
    return dot16(vec4<u32>(0x01010101u), x);
}

// Packs the quotients of v / d into xq[e] word i and their remainders into the second plane.
fn pack_q8(v: array<vec4<f32>, 8>, k: u32, d: f32, inv_d: f32) -> vec2<u32> {
    let q = round(v[k] * inv_d);
    let r = round((v[k] - q * d) * (254.0 * inv_d));
    return vec2<u32>(pack4xI8(vec4<i32>(q)), pack4xI8(vec4<i32>(r)));
}

// Quantizes columns c0 .. c0 + Q8_CHUNK (those below n_cols) of x' for staged tokens 0 .. n_tok
// (rows x_row(t)) into xq and xd (token t of the chunk from entry t * Q8_CHUNK / 16 of each plane and scale
// t * Q8_CHUNK / 32), a block a thread. Call in uniform control flow
// between two workgroupBarrier()s: before, so that the previous chunk's readers are done; after,
// so that this chunk is visible.
fn stage_x(n_tok: u32, c0: u32, lid: u32) {
    let nb = min(Q8_CHUNK, p.n_cols - c0) / 32u;
    for (var i = lid; i < n_tok * nb; i += WG) {
        let t = i / nb;
        let b = i % nb;
        let src = (x_row(t) * p.n_cols + c0) / 4u + 8u * b;
        var v: array<vec4<f32>, 8>;
        var amax = vec4<f32>(0.0);
        for (var k = 0u; k < 8u; k++) {
            v[k] = xv(src + k);
            amax = max(amax, abs(v[k]));
        }
        let d = max(max(amax.x, amax.y), max(amax.z, amax.w)) / 127.0;
        let inv_d = select(0.0, 1.0 / d, d > 0.0);
        let dst = t * (Q8_CHUNK / 32u) + b;
        for (var h = 0u; h < 2u; h++) {
            let a = pack_q8(v, 4u * h, d, inv_d);
            let b1 = pack_q8(v, 4u * h + 1u, d, inv_d);
            let c = pack_q8(v, 4u * h + 2u, d, inv_d);
            let e = pack_q8(v, 4u * h + 3u, d, inv_d);
            xq[2u * dst + h] = vec4<u32>(a.x, b1.x, c.x, e.x);
            xq[2u * dst + h + Q8_PLANE] = vec4<u32>(a.y, b1.y, c.y, e.y);
        }
        xd[dst] = d / 254.0;
    }
}
