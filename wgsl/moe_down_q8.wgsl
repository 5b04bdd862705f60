// tandem:include common/bits.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/moe_down_io.wgsl
// tandem:include common/q8_stage.wgsl
// tandem:include common/unit_q8.wgsl
// tandem:qtypes q4_k q6_k q8_0
// tandem:subgroups
//
// moe_down.wgsl (read it first) with the k routes' h staged as int8 (common/q8_stage.wgsl; route j
// is staged token j, so k is at most Q8_TOKENS: kernels::moe::down takes moe_down beyond): per
// chunk of Q8_CHUNK columns the workgroup stages every route's h once, then each row's threads
// stride over the chunk's (route, unit) pairs and dot them by dot4I8Packed.

override WG: u32 = 256u;
override ROWS: u32 = 4u;

const Q8_TOKENS: u32 = 8u;
const Q8_CHUNK: u32 = 512u;

// The rows' input, h (common/q8_stage.wgsl): staged token j is route j's row.
fn xv(i: u32) -> vec4<f32> {
    return h[i];
}

fn x_row(j: u32) -> u32 {
    return j;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let threads = WG / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row = (wg.x + wg.y * nwg.x) * ROWS + slot;
    let bpr = p.n_cols / QK;
    var acc = 0.0;
    var hit = false;
    for (var j = 0u; j < p.k; j++) {
        let e = route[j * 2u];
        hit = hit || (e >= p.e0 && e < p.e0 + p.n_exp);
    }
    for (var c0 = 0u; c0 < p.n_cols; c0 += Q8_CHUNK) {
        workgroupBarrier();
        stage_x(p.k, c0, inv.lid);
        workgroupBarrier();
        if (row < p.n_rows) {
            let u0 = c0 / UNIT;
            let units = min(Q8_CHUNK, p.n_cols - c0) / UNIT;
            for (var t = lane; t < p.k * units; t += threads) {
                let j = t / units;
                let e = route[j * 2u];
                if (e < p.e0 || e >= p.e0 + p.n_exp) {
                    continue;
                }
                let u = t - j * units;
                let b = ((e - p.e0) * p.n_rows + row) * bpr + (u0 + u) / (QK / UNIT);
                let wt = bitcast<f32>(route[j * 2u + 1u]);
                acc += wt * unit_dot_x(unit_w(b, u0 + u), unit_x(j, u));
            }
        }
    }
    let sum = row_sum(acc, inv, threads);
    if (lane == 0u && row < p.n_rows && hit) {
        x[row] += sum;
    }
}
