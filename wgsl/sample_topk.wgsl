// tandem:include common/wg_argmax.wgsl
//
// Sampling, stage 1 of 2: the repetition penalty, then each workgroup's K best logits.
// Workgroup g loads logits[row, g * SLICE .. + SLICE] into workgroup memory, applies the penalty
// to the recent tokens that fall in its slice (each distinct id once: logit > 0 ? logit / p :
// logit * p, as llama.cpp), then takes its K largest by K rounds of a workgroup argmax (the lowest
// id wins ties) and writes them, best first, to its K candidate slots (-inf and id 0xffffffff
// where the slice has fewer). Stage 2 (sample.wgsl) merges the candidates of all workgroups.

const SLICE: u32 = 2048u;
const K: u32 = 64u;
const NEG: f32 = -3.0e38;

struct Params {
    n_vocab: u32,
    row: u32,
    n_history: u32,     // recent tokens to penalise (<= 256)
    penalty: f32,       // 1: off
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;              // [rows, n_vocab]
@group(0) @binding(1) var<storage, read> history: array<u32>;             // [n_history]
@group(0) @binding(2) var<storage, read_write> cand: array<vec2<u32>>;    // [n_groups * K] (f32 bits, id)
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> vals: array<f32, SLICE>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = wg.x;
    let start = g * SLICE;
    for (var i = lid; i < SLICE; i += 256u) {
        let id = start + i;
        vals[i] = select(NEG, logits[p.row * p.n_vocab + id], id < p.n_vocab);
    }
    workgroupBarrier();
    if (lid < p.n_history && p.penalty != 1.0) {
        let id = history[lid];
        var first = true;
        for (var j = 0u; j < lid; j++) {
            if (history[j] == id) {
                first = false;
            }
        }
        if (first && id >= start && id < start + SLICE && id < p.n_vocab) {
            let v = vals[id - start];
            vals[id - start] = select(v * p.penalty, v / p.penalty, v > 0.0);
        }
    }
    workgroupBarrier();
    for (var k = 0u; k < K; k++) {
        var bv = NEG;
        var bi = 0xffffffffu;
        for (var i = lid; i < SLICE; i += 256u) {
            if (vals[i] > bv) {
                bv = vals[i];
                bi = i;
            }
        }
        let best = wg_argmax(bv, bi, lid);
        if (lid == 0u) {
            let i = best.y;
            if (i != 0xffffffffu && bitcast<f32>(best.x) > NEG) {
                cand[g * K + k] = vec2<u32>(best.x, start + i);
                vals[i] = NEG;
            } else {
                cand[g * K + k] = vec2<u32>(bitcast<u32>(NEG), 0xffffffffu);
            }
        }
        workgroupBarrier();
    }
}
