// tandem:include common/bits.wgsl
// tandem:include common/reduce.wgsl
// tandem:include common/unit_dot.wgsl
// tandem:per-qtype
// tandem:subgroups
//
// x[t, r] += sum_j weight_j * (D_e[r, :] . h[j, :]) over the k routes j of each of the few tokens
// t of a decode or small pass, e = route[j].id: the routed experts' down projections, the route
// weights and the sum over the k experts fused into the residual add. Each output row is summed
// over its k experts inside one workgroup (no float atomics); routes whose expert lies outside
// this chunk [e0, e0 + n_exp) are skipped (the chunk that holds them adds them in its own
// dispatch).
// Weight layout: ffn_down_exps as stored, [n_expert, n_embd, n_ff]: expert e - e0 starts at row
// n_rows * (e - e0) of the chunk.
// Work split: a workgroup per ROWS output rows (2-D grid) and token (z); the WG / ROWS threads of
// a row stride over the (route, unit) pairs of its k expert rows (units: common/unit_dot.wgsl or
// the type's twin), accumulating weight_j * partial dots; one reduction per row (row_sum:
// common/reduce.wgsl, or its subgroup twin in the `_sg` variants).

override WG: u32 = 256u;
override ROWS: u32 = 4u;

struct Params {
    n_rows: u32,    // n_embd
    n_cols: u32,    // n_ff (expert FFN width)
    k: u32,
    e0: u32,
    n_exp: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;              // [n_exp, n_rows, n_cols / QK] blocks
@group(0) @binding(1) var<storage, read> h: array<vec4<f32>>;        // [n_tokens k, n_cols]
@group(0) @binding(2) var<storage, read_write> x: array<f32>;        // [n_tokens, n_rows]: the residual
@group(0) @binding(3) var<storage, read> route: array<u32>;          // [n_tokens k, 2]: (id, bitcast weight)
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<storage, read> wv: array<vec4<u32>>;  // binding 0 as 16-byte runs

// The rows' input, h (common/unit_dot.wgsl).
fn xv(i: u32) -> vec4<f32> {
    return h[i];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        inv: Invocation) {
    let threads = WG / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row = (wg.x + wg.y * nwg.x) * ROWS + slot;
    let j0 = wg.z * p.k;
    var acc = 0.0;
    var hit = false;
    if (row < p.n_rows) {
        let bpr = p.n_cols / QK;
        let h4 = p.n_cols / 4u;
        let units = p.n_cols / UNIT;
        for (var j = j0; j < j0 + p.k; j++) {
            let e = route[j * 2u];
            hit = hit || (e >= p.e0 && e < p.e0 + p.n_exp);
        }
        // One flat stride over the (route, unit) pairs: a thread's loads do not wait for a loop
        // over the k routes.
        for (var t = lane; t < p.k * units; t += threads) {
            let i = t / units;
            let j = j0 + i;
            let e = route[j * 2u];
            if (e < p.e0 || e >= p.e0 + p.n_exp) {
                continue;
            }
            let wt = bitcast<f32>(route[j * 2u + 1u]);
            acc += wt * unit_dot(((e - p.e0) * p.n_rows + row) * bpr, t - i * units, j * h4);
        }
    }
    let sum = row_sum(acc, inv, threads);
    if (lane == 0u && row < p.n_rows && hit) {
        x[wg.z * p.n_rows + row] += sum;
    }
}
