// tandem:include common/attn_scratch.wgsl
//
// Merges the n_split partial results of split attention (attention.wgsl) for one (token, head):
// with each part's running max m_i, sum l_i and unnormalised output o_i, out = sum_i w_i o_i /
// sum_i w_i l_i, w_i = e^(m_i - M), M = max_i m_i over the non-empty parts (empty parts have
// l_i = 0, w_i = 0). A workgroup of 256 threads: thread i < n_split weighs part i; thread (c, g)
// sums vec4 chunk c of the parts g, g + MG, ... (MG = 256 / HD4 groups), all loads issued at
// once, and the MG sums meet in workgroup memory. The includer defines `HD4` (vec4 chunks a head)
// and `part_at(i)`, vec4 i of the partial results ([n_tokens, n_head, n_split, 1 + HD4]: (m, l,
// 0, 0), output), and includes common/attn_scratch.wgsl, whose workgroup arrays it uses.

override MAX_SPLITS: u32 = 64u;                 // kernels::MAX_ATTN_SPLITS, at most 256
override MG: u32 = 256u / HD4;                  // thread groups summing the parts' chunks
override MPT: u32 = (MAX_SPLITS + MG - 1u) / MG;  // parts per thread (<= 16)

// The merged chunk `lid` (< HD4) of the parts at `base` (m_i and l_i go through `scores` and
// `probs`, the sums through `dots`); every thread calls it, in uniform control flow, with the
// same `n_split` (>= 1).
fn merge_parts(lid: u32, base: u32, n_split: u32) -> vec4<f32> {
    // This thread's output loads, issued before the weights are known.
    let c = lid % HD4;
    let g = lid / HD4;
    var ov: array<vec4<f32>, 16>;
    for (var j = 0u; j < MPT; j++) {
        let i = g + j * MG;
        if (g < MG && i < n_split) {
            ov[j] = part_at(base + i * (HD4 + 1u) + 1u + c);
        } else {
            ov[j] = vec4<f32>(0.0);
        }
    }
    var mli = vec2<f32>(-3.0e38, 0.0);
    if (lid < n_split) {
        mli = part_at(base + lid * (HD4 + 1u)).xy;
    }
    scores[lid] = mli.x;
    probs[lid] = mli.y;
    workgroupBarrier();
    var mx = -3.0e38;
    for (var i = 0u; i < n_split; i++) {
        if (probs[i] > 0.0) {
            mx = max(mx, scores[i]);
        }
    }
    workgroupBarrier();
    if (lid < n_split) {
        let w = select(0.0, exp(mli.x - mx), mli.y > 0.0);
        scores[lid] = w;
        probs[lid] = w * mli.y;
    }
    workgroupBarrier();
    var total = 0.0;
    for (var i = 0u; i < n_split; i++) {
        total += probs[i];
    }
    var o = vec4<f32>(0.0);
    for (var j = 0u; j < MPT; j++) {
        let i = g + j * MG;
        if (g < MG && i < n_split) {
            o += scores[i] * ov[j];
        }
    }
    dots[lid] = o;
    workgroupBarrier();
    var s = vec4<f32>(0.0);
    if (lid < HD4) {
        for (var k = 0u; k < MG; k++) {
            s += dots[k * HD4 + lid];
        }
    }
    return s / total;
}
