// tandem:include common/q8_dot.wgsl
// x' staged in workgroup memory as int8 (common/q8_dot.wgsl), for the decode kernels that dot it
// with quantized weights (matvec_q8.wgsl, matvec_glu_q8.wgsl): x' read from global memory once per
// workgroup instead of once per group of rows, and quantized there, so the decode needs no
// dispatch of its own for it. Columns are staged Q8_CHUNK at a time for up to Q8_TOKENS tokens;
// both are constants of the includer (Q8_CHUNK a multiple of 256, so chunks hold whole blocks of
// every K-quant). The units (common/unit_q8.wgsl) read it through x16, x_d and x_sum.
// Include-only; the includer has WG, `p.n_cols`, `fn xv(i: u32) -> vec4<f32>`, x' at vec4 i of
// its x (with the norm prologue: common/rms_fold.wgsl, which sums x^2 over these calls), and
// `fn x_row(t: u32) -> u32`, the row of x that staged token t is.

// Entries of one plane; the remainders' plane follows the quotients'.
const Q8_PLANE: u32 = Q8_TOKENS * Q8_CHUNK / 16u;

var<workgroup> xq: array<vec4<u32>, 2u * Q8_PLANE>;  // 16 int8 an entry
var<workgroup> xd: array<f32, Q8_TOKENS * Q8_CHUNK / 32u>;  // each block's d / 254
var<workgroup> xsum: array<f32, Q8_TOKENS * Q8_CHUNK / 16u>;  // each entry's sum16, as f32

// Entry e (16 values) of staged token t's chunk.
fn x16(t: u32, e: u32) -> X16 {
    let i = t * (Q8_CHUNK / 16u) + e;
    return X16(xq[i], xq[i + Q8_PLANE]);
}

// The unit (d / 254) of block s of staged token t's chunk.
fn x_d(t: u32, s: u32) -> f32 {
    return xd[t * (Q8_CHUNK / 32u) + s];
}

// The sum of entry e's 16 values (in units of d / 254) as f32: exact (under 2^24). Summed once
// when staged, not by every unit that reads the entry.
fn x_sum(t: u32, e: u32) -> f32 {
    return xsum[t * (Q8_CHUNK / 16u) + e];
}

// Quantizes columns c0 .. c0 + Q8_CHUNK (those below n_cols) of x' for staged tokens 0 .. n_tok
// (rows x_row(t)) into xq, xd and xsum, a block a thread. Call in uniform control flow between two
// workgroupBarrier()s: before, so that the previous chunk's readers are done; after, so that this
// chunk is visible.
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
        let d = q8_scale(amax);
        let dst = t * (Q8_CHUNK / 32u) + b;
        let halves = quantize_block(v, d);
        for (var h = 0u; h < 2u; h++) {
            xq[2u * dst + h] = halves[h].q;
            xq[2u * dst + h + Q8_PLANE] = halves[h].r;
            xsum[2u * dst + h] = f32(sum16(halves[h]));
        }
        xd[dst] = d / 254.0;
    }
}
