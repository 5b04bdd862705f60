// tandem:include common/bits.wgsl
// tandem:include common/rms_fold.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/act.wgsl
// tandem:include common/q8_stage.wgsl
// tandem:include common/unit_q8.wgsl
// tandem:include common/glu_rows_q8.wgsl
// tandem:include common/moe_gate_up_io.wgsl
// tandem:qtypes q4_k q6_k q8_0
// tandem:subgroups
//
// moe_gate_up.wgsl (read it first) with x' staged as int8 as in matvec_glu_q8.wgsl: after the
// routing prologue the workgroup stages its route's token's x' once per chunk of Q8_CHUNK columns
// (with the norm prologue's sums of x^2), then each group of RPT outputs dots the chunk's units
// with its expert's gate and up rows by dot4I8Packed (common/glu_rows_q8.wgsl). Q8_CHUNK is 2048
// so that the routing's workgroup memory and the staged x' fit in WebGPU's default 16 KiB.

override WG: u32 = 256u;
override ROWS: u32 = 4u;
override RPT: u32 = 1u;  // rows per thread group: 1, 2 or 4, dividing ROWS

const Q8_TOKENS: u32 = 1u;
const Q8_CHUNK: u32 = 2048u;

// The route's token (common/q8_stage.wgsl), set before staging.
var<private> x_token: u32;

fn x_row(t: u32) -> u32 {
    return x_token;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let threads = WG * RPT / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row0 = wg.x * ROWS + slot * RPT;
    let j = wg.y;
    x_token = j / p.k;
    rms_row = x_token * (p.n_cols / 4u);
    let e = route_expert(j, wg.x, nwg.y, inv);
    let mine = e >= p.e0 && e < p.e0 + p.n_exp;
    let up = p.n_ff * (p.n_cols / QK);  // an expert's up rows follow its gate rows
    let gb0 = 2u * (e - p.e0) * up;
    let d = glu_dots_q8(mine && row0 < p.n_ff, gb0, up, row0, p.n_ff - 1u, lane, threads, inv.lid);
    let out = glu_outputs(d, inv, threads, WG);
    for (var i = lane; i < RPT; i += threads) {
        if (mine && row0 + i < p.n_ff) {
            h[j * p.n_ff + row0 + i] = out[i];
        }
    }
}
