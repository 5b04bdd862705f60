// tandem:include common/attn_scratch.wgsl
//
// Merges the n_split partial results of split attention (attention.wgsl) for one (token, head):
// with each part's running max m_i, sum l_i and unnormalised output o_i, out = sum_i w_i o_i /
// sum_i w_i l_i, w_i = e^(m_i - M), M = max_i m_i over the non-empty parts (empty parts have
// l_i = 0, w_i = 0). A workgroup of 256 threads: thread i < n_split weighs part i; thread (c, g)
// sums vec4 chunk c of the parts g, g + MG, ... (MG = 256 / HD4 groups), the first four loaded
// before the weights are known, and the MG sums meet in workgroup memory. The includer defines `HD4` (vec4 chunks a head)
// and `part_at(i)`, vec4 i of the partial results ([n_tokens, n_head, n_split, 1 + HD4]: (m, l,
// 0, 0), output), and includes common/attn_scratch.wgsl, whose workgroup arrays it uses.

override MG: u32 = 256u / HD4;  // thread groups summing the parts' chunks

// The merged chunk `lid` (< HD4) of the parts at `base` (m_i and l_i go through `scores` and
// `probs`, the sums through `dots`); every thread calls it, in uniform control flow, with the
// same `n_split` (>= 1).
fn merge_parts(lid: u32, base: u32, n_split: u32) -> vec4<f32> {
    // This thread's first four parts' outputs, loaded before the weights are known: in named
    // registers, not an array (in attention.wgsl's `_last` variant an array of them went to
    // local memory, bench/vk-stats).
    let c = lid % HD4;
    let g = lid / HD4;
    let at = base + 1u + c;
    let stride = HD4 + 1u;
    var o0 = vec4<f32>(0.0);
    var o1 = vec4<f32>(0.0);
    var o2 = vec4<f32>(0.0);
    var o3 = vec4<f32>(0.0);
    if (g < MG) {
        if (g < n_split) {
            o0 = part_at(at + g * stride);
        }
        if (g + MG < n_split) {
            o1 = part_at(at + (g + MG) * stride);
        }
        if (g + 2u * MG < n_split) {
            o2 = part_at(at + (g + 2u * MG) * stride);
        }
        if (g + 3u * MG < n_split) {
            o3 = part_at(at + (g + 3u * MG) * stride);
        }
    }
    var mli = vec2<f32>(-3.0e38, 0.0);
    if (lid < n_split) {
        mli = part_at(base + lid * stride).xy;
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
    if (g < MG) {
        if (g < n_split) {
            o += scores[g] * o0;
        }
        if (g + MG < n_split) {
            o += scores[g + MG] * o1;
        }
        if (g + 2u * MG < n_split) {
            o += scores[g + 2u * MG] * o2;
        }
        if (g + 3u * MG < n_split) {
            o += scores[g + 3u * MG] * o3;
        }
        for (var i = g + 4u * MG; i < n_split; i += MG) {
            o += scores[i] * part_at(at + i * stride);
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
