// tandem:include common/step.wgsl
//
// Merges the n_split partial results of attention.wgsl for each (head, token): with each part's
// running max m_i, sum l_i and unnormalised output o_i, out = sum_i w_i o_i / sum_i w_i l_i,
// w_i = e^(m_i - M), M = max_i m_i over the non-empty parts (empty parts have l_i = 0, w_i = 0).
// Grid (n_head, n_tokens), 256 threads: thread i < n_split weighs part i; then thread (c, g) sums
// vec4 chunk c of the parts g, g + G, ... (G = 256 / (HD / 4) groups), all loads issued at once,
// and the G sums meet in workgroup memory.

struct Params {
    n_head: u32,
    head_dim: u32,  // = HD
    _pad0: u32,
    _pad1: u32,
}

override HD: u32 = 64u;
override MAX_SPLITS: u32 = 64u;            // kernels::MAX_ATTN_SPLITS, at most 256
override HD4: u32 = HD / 4u;
override G: u32 = 256u / HD4;
override PPT: u32 = (MAX_SPLITS + G - 1u) / G;  // parts per thread (<= 16)

@group(0) @binding(0) var<storage, read> partial: array<vec4<f32>>;    // [n_tokens, n_head, n_split, 1 + HD / 4]
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;  // [n_tokens, n_head, HD / 4]
@group(0) @binding(2) var<uniform> p: Params;
@group(0) @binding(3) var<uniform> step: Step;

var<workgroup> ml: array<vec2<f32>, 256>;  // (m_i, l_i), then (w_i, w_i l_i)
var<workgroup> outs: array<vec4<f32>, 256>;  // [G, HD4]

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t = wg.y;
    if (t >= step.n_tokens) {
        return;
    }
    let n_split = step.attn_splits;
    let base = (t * p.n_head + h) * n_split * (HD4 + 1u);
    // This thread's output loads, issued before the weights are known.
    let c = lid % HD4;
    let g = lid / HD4;
    var ov: array<vec4<f32>, 16>;
    for (var j = 0u; j < PPT; j++) {
        let i = g + j * G;
        if (g < G && i < n_split) {
            ov[j] = partial[base + i * (HD4 + 1u) + 1u + c];
        } else {
            ov[j] = vec4<f32>(0.0);
        }
    }
    var mli = vec2<f32>(-3.0e38, 0.0);
    if (lid < n_split) {
        mli = partial[base + lid * (HD4 + 1u)].xy;
    }
    ml[lid] = mli;
    workgroupBarrier();
    var mx = -3.0e38;
    for (var i = 0u; i < n_split; i++) {
        let e = ml[i];
        if (e.y > 0.0) {
            mx = max(mx, e.x);
        }
    }
    workgroupBarrier();
    if (lid < n_split) {
        let w = select(0.0, exp(mli.x - mx), mli.y > 0.0);
        ml[lid] = vec2<f32>(w, w * mli.y);
    }
    workgroupBarrier();
    var total = 0.0;
    for (var i = 0u; i < n_split; i++) {
        total += ml[i].y;
    }
    var o = vec4<f32>(0.0);
    for (var j = 0u; j < PPT; j++) {
        let i = g + j * G;
        if (g < G && i < n_split) {
            o += ml[i].x * ov[j];
        }
    }
    outs[lid] = o;
    workgroupBarrier();
    if (lid < HD4) {
        var s = vec4<f32>(0.0);
        for (var k = 0u; k < G; k++) {
            s += outs[k * HD4 + lid];
        }
        out[(t * p.n_head + h) * HD4 + lid] = s / total;
    }
}
