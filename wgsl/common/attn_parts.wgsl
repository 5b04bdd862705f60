// Where split attention (attention.wgsl) puts a workgroup's results: the partial results of a
// split pass go to `partial`, and attention_combine.wgsl, the next dispatch, merges them. The
// `last` twin (common/attn_parts_last.wgsl) merges them in the kernel instead.

@group(0) @binding(4) var<storage, read_write> partial: array<vec4<f32>>;  // [n_tokens, n_head, n_split, 1 + HD / 4]: (m, l, 0, 0), output

// Head h0 + g's output: the KG partial outputs `acc` of the threads meet in workgroup memory;
// with one split it goes to `out` (divided by the sum l), otherwise (m, l, output) to `partial`.
// Every thread calls it, in uniform control flow.
fn finish_head(at: Out, g: u32, acc: vec4<f32>, m: f32, l: f32) {
    let o = head_output(at, acc);
    if (at.lid < HD4) {
        let h = at.h0 + g;
        if (at.n_split == 1u) {
            out[(at.t * p.n_head + h) * HD4 + at.lid] = o / l;
        } else {
            let po = ((at.t * p.n_head + h) * at.n_split + at.split) * (HD4 + 1u);
            if (at.lid == 0u) {
                partial[po] = vec4<f32>(m, l, 0.0, 0.0);
            }
            partial[po + 1u + at.lid] = o;
        }
    }
}
