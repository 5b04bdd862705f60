// tandem:include common/bits.wgsl
// tandem:include common/rms_fold.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/act.wgsl
// tandem:include common/moe_gate_up_io.wgsl
// tandem:include common/q8_stage.wgsl
// tandem:include common/unit_q8.wgsl
// tandem:qtypes q4_k q6_k q8_0
// tandem:subgroups
//
// moe_gate_up.wgsl (read it first) with x' staged as int8 (common/q8_stage.wgsl), as the dense
// matvec_glu_q8.wgsl: per chunk of Q8_CHUNK columns the workgroup stages the token's x' once,
// then each row's threads dot the chunk's units of its expert's gate and up rows by
// dot4I8Packed.

override WG: u32 = 256u;
override ROWS: u32 = 4u;

const Q8_TOKENS: u32 = 1u;
const Q8_CHUNK: u32 = 4096u;

// The one token's x (common/q8_stage.wgsl).
fn x_row(t: u32) -> u32 {
    return 0u;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, inv: Invocation) {
    let threads = WG / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row = wg.x * ROWS + slot;
    let j = wg.y;
    let e = route[j * 2u];
    let mine = e >= p.e0 && e < p.e0 + p.n_exp;
    let bpr = p.n_cols / QK;
    let gb = ((e - p.e0) * 2u * p.n_ff + row) * bpr;
    var gu = vec2<f32>(0.0);
    for (var c0 = 0u; c0 < p.n_cols; c0 += Q8_CHUNK) {
        workgroupBarrier();
        stage_x(1u, c0, inv.lid);
        workgroupBarrier();
        if (mine && row < p.n_ff) {
            let u0 = c0 / UNIT;
            for (var u = lane; u < min(Q8_CHUNK, p.n_cols - c0) / UNIT; u += threads) {
                let xs = unit_x(0u, u);
                let b = (u0 + u) / (QK / UNIT);
                gu += vec2<f32>(unit_dot_x(unit_w(gb + b, u0 + u), xs),
                                unit_dot_x(unit_w(gb + p.n_ff * bpr + b, u0 + u), xs));
            }
        }
    }
    let sum = row_sum4(vec4<f32>(gu, 0.0, 0.0), inv, threads);
    gu = sum.xy * rms_fold_scale(row_sum(x_ss, inv, WG), p.n_cols, p.eps);
    if (lane == 0u && mine && row < p.n_ff) {
        h[j * p.n_ff + row] = glu_act(gu.x, p.act) * gu.y;
    }
}
