// tandem:include common/step.wgsl
// tandem:include common/attn_merge.wgsl
// tandem:include common/q8_vec4.wgsl
//
// Merges the n_split partial results of attention.wgsl for each (head, token)
// (common/attn_merge.wgsl). Grid (n_head, n_tokens), 256 threads. With `Q8` (the small passes
// whose output projection reads only int8 x'), the head's merged values go to `xq` instead of
// `out`, quantized as quantize_q8.wgsl quantizes a row (common/q8_vec4.wgsl, scale 1): the
// projection's input without a quantize dispatch or an f32 round trip.

struct Params {
    n_head: u32,
    head_dim: u32,  // = HD
    _pad0: u32,
    _pad1: u32,
}

override HD: u32 = 64u;
override HD4: u32 = HD / 4u;
override Q8: u32 = 0u;  // 1: write xq

@group(0) @binding(0) var<storage, read> partial: array<vec4<f32>>;    // [n_tokens, n_head, n_split, 1 + HD / 4]
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;  // [n_tokens, n_head, HD / 4]
@group(0) @binding(2) var<uniform> p: Params;
@group(0) @binding(3) var<uniform> step: Step;
@group(0) @binding(4) var<storage, read_write> xq: array<u32>;         // [n_tokens, 4 q8_row_len] words

fn part_at(i: u32) -> vec4<f32> {
    return partial[i];
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t = wg.y;
    if (t >= step.n_tokens) {
        return;
    }
    let n_split = step.attn_splits;
    let base = (t * p.n_head + h) * n_split * (HD4 + 1u);
    let o = merge_parts(lid, base, n_split);
    if (Q8 == 0u) {
        if (lid < HD4) {
            out[(t * p.n_head + h) * HD4 + lid] = o;
        }
        return;
    }
    // Vec4 i of the token's row; the last head's other threads write the row's padding.
    let i = h * HD4 + lid;
    let n_cols = p.n_head * HD;
    let row = t * q8_row_len(n_cols) * 4u;
    // The merge's last reads of workgroup memory are done before q8_store_vec4's.
    workgroupBarrier();
    q8_store_vec4(o, i, lid < HD4 || h == p.n_head - 1u, lid, row, n_cols);
    if (h == 0u && lid < 4u) {
        xq[row + 4u * q8_scale_at(n_cols) + lid] = select(0u, bitcast<u32>(1.0), lid == 0u);
    }
}
