// tandem:include common/bits.wgsl
// tandem:include common/mat_io.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/q8_stage.wgsl
// tandem:include common/unit_q8.wgsl
// tandem:qtypes q4_k q6_k q8_0
// tandem:subgroups
//
// matvec_batch.wgsl (read it first) with the tokens' x staged as int8 (common/q8_stage.wgsl),
// as the decode's matvec_q8.wgsl stages its one token's, so that a verification pass computes
// each token's products the way a decode step does (same quantization of x, exact integer dot
// products; only the float sums' order differs). Per chunk of Q8_CHUNK columns the workgroup
// stages its (up to) 8 tokens' x, then each row's threads load each unit's weights once and
// dot them with every token's x by dot4I8Packed.

override WG: u32 = 256u;
override ROWS: u32 = 4u;  // a power of two; the matvec's shape (kernels::MatvecShape)

const BATCH: u32 = 8u;  // tokens a workgroup (kernels::mat: MATVEC_BATCH_GROUP)
const Q8_TOKENS: u32 = BATCH;
const Q8_CHUNK: u32 = 512u;

@group(0) @binding(7) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs

// The tokens' x (common/q8_stage.wgsl): staged token t is row tok0 + t.
fn xv(i: u32) -> vec4<f32> {
    return x[i];
}

var<private> tok0: u32;

fn x_row(t: u32) -> u32 {
    return tok0 + t;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    tok0 = wg.z * BATCH;
    let n_tok = min(step_rows(step, p.rows_mode) - tok0, BATCH);
    let threads = WG / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row = (wg.x + wg.y * nwg.x) * ROWS + slot;
    let rb = min(row, p.n_rows - 1u) * (p.n_cols / QK);
    var a = array<f32, BATCH>();
    for (var c0 = 0u; c0 < p.n_cols; c0 += Q8_CHUNK) {
        workgroupBarrier();
        stage_x(n_tok, c0, inv.lid);
        workgroupBarrier();
        if (row < p.n_rows) {
            let u0 = c0 / UNIT;
            for (var u = lane; u < min(Q8_CHUNK, p.n_cols - c0) / UNIT; u += threads) {
                let k = unit_w(rb + (u0 + u) / (QK / UNIT), u0 + u);
                for (var t = 0u; t < BATCH; t++) {
                    if (t < n_tok) {
                        a[t] += unit_dot_x(k, unit_x(t, u));
                    }
                }
            }
        }
    }
    let s0 = row_sum4(vec4<f32>(a[0], a[1], a[2], a[3]), inv, threads);
    workgroupBarrier();
    let s1 = row_sum4(vec4<f32>(a[4], a[5], a[6], a[7]), inv, threads);
    if (lane == 0u && row < p.n_rows) {
        for (var t = 0u; t < min(n_tok, 4u); t++) {
            store_out(tok0 + t, row, s0[t]);
        }
        for (var t = 4u; t < n_tok; t++) {
            store_out(tok0 + t, row, s1[t - 4u]);
        }
    }
}
