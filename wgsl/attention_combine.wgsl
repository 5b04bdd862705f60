// tandem:include common/step.wgsl
//
// Merges the n_split partial results of attention.wgsl for each (head, token): with each part's
// running max m_i, sum l_i and unnormalised output o_i, out = sum_i e^(m_i - M) o_i /
// sum_i e^(m_i - M) l_i, M = max_i m_i (empty parts have l_i = 0). Grid (n_head, n_tokens);
// thread d owns output dims d and d + 128.

struct Params {
    n_head: u32,
    head_dim: u32,
}

@group(0) @binding(0) var<storage, read> partial: array<f32>;      // [n_tokens, n_head, n_split, head_dim + 2]
@group(0) @binding(1) var<storage, read_write> out: array<f32>;    // [n_tokens, n_head * head_dim]
@group(0) @binding(2) var<uniform> p: Params;
@group(0) @binding(3) var<uniform> step: Step;

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t = wg.y;
    if (t >= step.n_tokens) {
        return;
    }
    let hd = p.head_dim;
    let n_split = step.attn_splits;
    let base = (t * p.n_head + h) * n_split * (hd + 2u);
    var mx = -3.0e38;
    for (var i = 0u; i < n_split; i++) {
        let o = base + i * (hd + 2u);
        if (partial[o + 1u] > 0.0) {
            mx = max(mx, partial[o]);
        }
    }
    var total = 0.0;
    var acc0 = 0.0;
    var acc1 = 0.0;
    for (var i = 0u; i < n_split; i++) {
        let o = base + i * (hd + 2u);
        let l = partial[o + 1u];
        if (l > 0.0) {
            let w = exp(partial[o] - mx);
            total += w * l;
            if (lid < hd) {
                acc0 += w * partial[o + 2u + lid];
            }
            if (lid + 128u < hd) {
                acc1 += w * partial[o + 2u + lid + 128u];
            }
        }
    }
    let oo = (t * p.n_head + h) * hd;
    if (lid < hd) {
        out[oo + lid] = acc0 / total;
    }
    if (lid + 128u < hd) {
        out[oo + lid + 128u] = acc1 / total;
    }
}
