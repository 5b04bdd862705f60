// tandem:include common/bits.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/moe_down_batch_io.wgsl
// tandem:include common/q8_stage.wgsl
// tandem:include common/unit_q8.wgsl
// tandem:qtypes q4_k q6_k q8_0
// tandem:subgroups
//
// moe_down_batch.wgsl's products (read it first) for small batched passes (2..16 tokens;
// kernels::moe::down_batch picks it), in the decode kernels' shape as
// moe_gate_up_batch_q8.wgsl: a workgroup per (ROWS rows, expert of this chunk); for each group
// of up to 8 of the expert's slots and each chunk of Q8_CHUNK columns it stages the slots' h as
// int8 (common/q8_stage.wgsl), then each row's threads load each unit's weights once and dot them
// with every staged slot's h, as moe_down_q8.wgsl does for one token.

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
    return h[i];
}

// Staged slot t's h is row s (common/q8_stage.wgsl).
fn x_row(t: u32) -> u32 {
    return lists[p.n_expert + 1u + slot0 + t];
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
    let rb = (wg.y * p.n_rows + min(row, p.n_rows - 1u)) * bpr;
    for (var s0 = 0u; s0 < count; s0 += BATCH) {
        slot0 = fc.x + s0;
        let n = min(count - s0, BATCH);
        var a = array<f32, BATCH>();
        for (var c0 = 0u; c0 < p.n_cols; c0 += Q8_CHUNK) {
            workgroupBarrier();
            stage_x(n, c0, inv.lid);
            workgroupBarrier();
            if (row < p.n_rows) {
                let u0 = c0 / UNIT;
                for (var u = lane; u < min(Q8_CHUNK, p.n_cols - c0) / UNIT; u += threads) {
                    let k = unit_w(rb + (u0 + u) / (QK / UNIT), u0 + u);
                    for (var t = 0u; t < BATCH; t++) {
                        if (t < n) {
                            a[t] += unit_dot_x(k, unit_x(t, u));
                        }
                    }
                }
            }
        }
        let a0 = row_sum4(vec4<f32>(a[0], a[1], a[2], a[3]), inv, threads);
        workgroupBarrier();
        let a1 = row_sum4(vec4<f32>(a[4], a[5], a[6], a[7]), inv, threads);
        if (lane == 0u && row < p.n_rows) {
            for (var t = 0u; t < n; t++) {
                let s = lists[p.n_expert + 1u + slot0 + t];
                let sum = select(a1[t % 4u], a0[t % 4u], t < 4u);
                o[s * p.n_rows + row] = bitcast<f32>(route[2u * s + 1u]) * sum;
            }
        }
    }
}
