// tandem:include common/wg_argmax.wgsl
//
// Sampling, stage 2 of 2: merges the candidates of stage 1 (sample_topk.wgsl) and draws a token,
// following llama.cpp's default chain: top-k, top-p, min-p (both on the softmax at temperature 1),
// then the temperature, then a draw with the host's uniform random number u. Writes the id to
// tokens[row], where the next pass's embedding reads it (row 0 of a session's pass; a batched
// step's row of each sampled sequence).
// One workgroup: each thread holds up to PER candidates; K rounds of a workgroup argmax give the
// best K in order; thread 0 then walks that short list.

const K: u32 = 64u;
const PER: u32 = 32u;   // candidates per thread: 256 * 32 = 8192 = 128 groups of K
const NEG: f32 = -3.0e38;

struct Params {
    n_cand: u32,    // candidates written by stage 1 (groups * K), <= 8192
    top_k: u32,     // 1..=K
    top_p: f32,     // 1: off
    min_p: f32,     // 0: off
    temp: f32,      // > 0
    u: f32,         // uniform in [0, 1)
    row: u32,       // the logits row sampled (sample_topk.wgsl's) and the token written
    _pad0: u32,
}

@group(0) @binding(0) var<storage, read> cand: array<vec2<u32>>;       // [n_cand] (f32 bits, id)
@group(0) @binding(1) var<storage, read_write> tokens: array<u32>;     // [> row]
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> top_v: array<f32, K>;
var<workgroup> top_i: array<u32, K>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    var v: array<f32, PER>;
    var ids: array<u32, PER>;
    for (var j = 0u; j < PER; j++) {
        let c = lid * PER + j;
        if (c < p.n_cand) {
            let e = cand[c];
            v[j] = bitcast<f32>(e.x);
            ids[j] = e.y;
        } else {
            v[j] = NEG;
            ids[j] = 0xffffffffu;
        }
    }
    for (var k = 0u; k < p.top_k; k++) {
        var bv = NEG;
        var bj = 0u;
        var bid = 0xffffffffu;
        for (var j = 0u; j < PER; j++) {
            if (ids[j] != 0xffffffffu && (v[j] > bv || (v[j] == bv && ids[j] < bid))) {
                bv = v[j];
                bj = j;
                bid = ids[j];
            }
        }
        let best = wg_argmax(bv, bid, lid);
        let win = best.y;
        if (lid == 0u) {
            top_v[k] = bitcast<f32>(best.x);
            top_i[k] = win;
        }
        // The owner of the winning id drops it from its list.
        if (win != 0xffffffffu && bid == win) {
            ids[bj] = 0xffffffffu;
        }
    }
    if (lid != 0u) {
        return;
    }
    // Candidates that exist (fewer than top_k when the vocabulary is small).
    var n = 0u;
    while (n < p.top_k && top_i[n] != 0xffffffffu) {
        n++;
    }
    // top-p and min-p on the softmax at temperature 1 (llama.cpp's order).
    let m = top_v[0];
    var total = 0.0;
    for (var i = 0u; i < n; i++) {
        total += exp(top_v[i] - m);
    }
    var keep = n;
    var cum = 0.0;
    for (var i = 0u; i < n && p.top_p < 1.0; i++) {
        cum += exp(top_v[i] - m) / total;
        if (cum >= p.top_p) {
            keep = i + 1u;
            break;
        }
    }
    var kept = 1u;
    for (var i = 1u; i < keep; i++) {
        if (exp(top_v[i] - m) >= p.min_p) {
            kept = i + 1u;
        } else {
            break;
        }
    }
    // Temperature, then the draw.
    var z = 0.0;
    for (var i = 0u; i < kept; i++) {
        z += exp((top_v[i] - m) / p.temp);
    }
    let goal = p.u * z;
    var acc = 0.0;
    var chosen = top_i[kept - 1u];
    for (var i = 0u; i < kept; i++) {
        acc += exp((top_v[i] - m) / p.temp);
        if (acc > goal) {
            chosen = top_i[i];
            break;
        }
    }
    tokens[p.row] = select(chosen, 0u, chosen == 0xffffffffu);
}
