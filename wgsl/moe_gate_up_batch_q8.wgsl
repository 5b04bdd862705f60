// tandem:include common/bits.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/act.wgsl
// tandem:include common/moe_gate_up_batch_io.wgsl
// tandem:include common/q8_stage.wgsl
// tandem:include common/unit_q8.wgsl
// tandem:qtypes q4_k q6_k q8_0
// tandem:subgroups
//
// moe_gate_up_batch.wgsl's products (read it first) for small batched passes (2..16 tokens:
// speculative verification; kernels::moe::gate_up_batch picks it), in the decode kernels' shape
// instead of 64-token tiles: a workgroup per (ROWS rows, expert of this chunk), grid [n_ff /
// ROWS, n_exp]; experts with no slots exit at once. For each group of up to 8 of the expert's
// slots and each chunk of Q8_CHUNK columns, the workgroup stages the slots' x as int8
// (common/q8_stage.wgsl), then each row's threads load each unit's gate and up weights once and
// dot them with every staged slot's x. Each selected expert is read once per pass, and a slot's
// products are computed as the decode's (moe_gate_up_q8.wgsl): same quantization of x, exact
// integer dot products.

override WG: u32 = 256u;
override ROWS: u32 = 4u;

const BATCH: u32 = 8u;  // slots staged at once
const Q8_TOKENS: u32 = BATCH;
const Q8_CHUNK: u32 = 512u;

// The expert's list (first, count), passed from one thread to all.
var<workgroup> list: vec2<u32>;
// The first staged slot's place in the lists.
var<private> slot0: u32;

fn xv(i: u32) -> vec4<f32> {
    return x[i];
}

// Staged slot t is token s / k of the pass (common/q8_stage.wgsl).
fn x_row(t: u32) -> u32 {
    return lists[p.n_expert + 1u + slot0 + t] / p.k;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, inv: Invocation) {
    let e = p.e0 + wg.y;
    if (inv.lid == 0u) {
        list = vec2<u32>(lists[e], lists[e + 1u] - lists[e]);
    }
    let fc = workgroupUniformLoad(&list);
    let count = fc.y;
    if (count == 0u) {
        return;
    }
    let threads = WG / ROWS;
    let lane = inv.lid % threads;
    let row = wg.x * ROWS + inv.lid / threads;
    let bpr = p.n_cols / QK;
    let gb = (wg.y * 2u * p.n_ff + min(row, p.n_ff - 1u)) * bpr;
    let ub = gb + p.n_ff * bpr;
    for (var s0 = 0u; s0 < count; s0 += BATCH) {
        slot0 = fc.x + s0;
        let n = min(count - s0, BATCH);
        var g = array<f32, BATCH>();
        var v = array<f32, BATCH>();
        for (var c0 = 0u; c0 < p.n_cols; c0 += Q8_CHUNK) {
            workgroupBarrier();
            stage_x(n, c0, inv.lid);
            workgroupBarrier();
            if (row < p.n_ff) {
                let u0 = c0 / UNIT;
                for (var u = lane; u < min(Q8_CHUNK, p.n_cols - c0) / UNIT; u += threads) {
                    let b = (u0 + u) / (QK / UNIT);
                    let kg = unit_w(gb + b, u0 + u);
                    let ku = unit_w(ub + b, u0 + u);
                    for (var t = 0u; t < BATCH; t++) {
                        if (t < n) {
                            let xs = unit_x(t, u);
                            g[t] += unit_dot_x(kg, xs);
                            v[t] += unit_dot_x(ku, xs);
                        }
                    }
                }
            }
        }
        let g0 = row_sum4(vec4<f32>(g[0], g[1], g[2], g[3]), inv, threads);
        workgroupBarrier();
        let g1 = row_sum4(vec4<f32>(g[4], g[5], g[6], g[7]), inv, threads);
        workgroupBarrier();
        let v0 = row_sum4(vec4<f32>(v[0], v[1], v[2], v[3]), inv, threads);
        workgroupBarrier();
        let v1 = row_sum4(vec4<f32>(v[4], v[5], v[6], v[7]), inv, threads);
        if (lane == 0u && row < p.n_ff) {
            for (var t = 0u; t < n; t++) {
                let gs = select(g1[t % 4u], g0[t % 4u], t < 4u);
                let vs = select(v1[t % 4u], v0[t % 4u], t < 4u);
                let s = lists[p.n_expert + 1u + slot0 + t];
                h[s * p.n_ff + row] = glu_act(gs, p.act) * vs;
            }
        }
    }
}
