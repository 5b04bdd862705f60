// The router's product folded into the attention output's decode matvec (matvec_route.wgsl,
// matvec_route_q8.wgsl), so a MoE decode step has no router dispatch. The router reads
// x' = RMSNorm(x) * g (g: the FFN norm's weights), and its logit for expert e is
//   s * sum_i R[e, i] g_i x_i,   s = 1 / sqrt(mean(x^2) + eps),
// so each workgroup that writes rows i of the new x adds its share sum_{i in its rows} R[e, i]
// g_i x_i for every expert, and moe_gate_up, which reads x whole anyway, applies s.
// WGSL has no float atomics, so the shares are summed as 52-bit fixed point (32 bits below the
// point) in u32 atomics: each share's magnitude split into three limbs of 20 bits (value = hi 2^8
// + mid 2^-12 + lo 2^-32), added to the limbs of its sign. Integer sums do not depend on the
// order the workgroups finish in, so the logits are deterministic, and a limb's sum of up to
// 4096 shares stays below 2^32 (kernels::route_share::ROUTE_SHARE_MAX_WORKGROUPS). A slot of shares is
// 6 n_expert words: limb l of sign s (0: +, 1: -) of expert e at (3 s + l) n_expert + e.
// Slots rotate over the folded layers: layer j adds into slot j, and its workgroup 0 clears the
// slot of the folded layer before it (whose moe_gate_up has read it), so each slot is zero
// again before its layer's next step (kernels::RouteShare).
// Include-only; the includer has WG, ROWS, RPT, `p` (common/mat_io.wgsl), `norm_w` (binding 6,
// here g) and the decode row pass `decode_rows` (common/matvec_dots.wgsl or its `_q8` twin).

@group(0) @binding(8) var<storage, read> router: array<vec4<f32>>;          // [n_expert, y_stride]
@group(0) @binding(9) var<storage, read_write> shares: array<atomic<u32>>;  // slots of 6 n_expert

// The workgroup's new x, row by row (0 past the chunk's last row).
var<workgroup> share_x: array<f32, ROWS>;

// Where a workgroup has 4 to 16 rows (a multiple of 4), each invocation below n_expert loads its
// expert's R g over the rows before the row pass (load_shares_ahead), so the loads' latency
// hides behind the product's instead of following it (H100, Qwen3-30B-A3B shape: the attention
// output's 48 dispatches 734 us a pass, against 776 loaded after and 585 without shares;
// bench/RESULTS.md, thirty-ninth session). Otherwise it loads them after.
override SHARES_AHEAD: bool = ROWS % 4u == 0u && ROWS <= 16u;
var<private> share_w0: vec4<f32>;
var<private> share_w1: vec4<f32>;
var<private> share_w2: vec4<f32>;
var<private> share_w3: vec4<f32>;

// R g of expert e over the 4 rows of the chunk from row0 + r (0 past its last row).
fn share_w(e: u32, row0: u32, r: u32) -> vec4<f32> {
    let c = p.y_offset + row0 + r;
    if (row0 + r >= p.n_rows) {
        return vec4<f32>(0.0);
    }
    return router[(e * p.y_stride + c) / 4u] * norm_w[c / 4u];
}

// Loads R g ahead for the workgroup whose first row is `row0` of the chunk (SHARES_AHEAD).
fn load_shares_ahead(row0: u32, lid: u32) {
    if (!SHARES_AHEAD || lid >= p.route_experts) {
        return;
    }
    share_w0 = share_w(lid, row0, 0u);
    if (ROWS > 4u) {
        share_w1 = share_w(lid, row0, 4u);
    }
    if (ROWS > 8u) {
        share_w2 = share_w(lid, row0, 8u);
    }
    if (ROWS > 12u) {
        share_w3 = share_w(lid, row0, 12u);
    }
}

// share_x[r .. r + 4].
fn share_x4(r: u32) -> vec4<f32> {
    return vec4<f32>(share_x[r], share_x[r + 1u], share_x[r + 2u], share_x[r + 3u]);
}

// Adds share `v` of expert e into the slot at `at` (words) of `ne` experts. Magnitudes are
// clamped at 2^28 (so a limb's share stays below 2^20); a NaN share adds nothing.
fn add_share(at: u32, e: u32, ne: u32, v: f32) {
    let a = min(abs(v), 268435456.0);
    let hi = floor(a / 256.0);
    let r = (a - hi * 256.0) * 4096.0;  // exact: a, hi * 256 and r are multiples of a's ulp
    let mid = floor(r);
    let lo = floor((r - mid) * 1048576.0);
    let o = at + select(0u, 3u * ne, v < 0.0) + e;
    if (lo > 0.0) {
        atomicAdd(&shares[o], u32(lo));
    }
    if (mid > 0.0) {
        atomicAdd(&shares[o + ne], u32(mid));
    }
    if (hi > 0.0) {
        atomicAdd(&shares[o + 2u * ne], u32(hi));
    }
}

// Stores the rows of the invocation's group (slot `slot` of the workgroup whose first row is
// `row0` of the chunk; `lane` of its threads), `sum` from the row pass (common/mat_io.wgsl's
// store_out), then adds the workgroup's shares; `first` for workgroup 0. Every invocation calls
// it, in uniform control flow. An invocation stores at most one row: lane < RPT <= WG * RPT /
// ROWS (ROWS <= WG).
fn store_with_shares(sum: vec4<f32>, row0: u32, slot: u32, lane: u32, first: bool, lid: u32) {
    let row = row0 + slot * RPT + lane;
    if (lane < RPT) {
        var v = 0.0;
        if (row < p.n_rows) {
            v = store_out(0u, row, sum[lane]);
        }
        share_x[row - row0] = v;
    }
    workgroupBarrier();
    let ne = p.route_experts;
    if (SHARES_AHEAD) {
        if (lid < ne) {
            var s = dot(share_w0, share_x4(0u));
            if (ROWS > 4u) {
                s += dot(share_w1, share_x4(4u));
            }
            if (ROWS > 8u) {
                s += dot(share_w2, share_x4(8u));
            }
            if (ROWS > 12u) {
                s += dot(share_w3, share_x4(12u));
            }
            add_share(p.route_at, lid, ne, s);
        }
    } else {
        let n = min(ROWS, p.n_rows - min(row0, p.n_rows));
        for (var e = lid; e < ne; e += WG) {
            var s = 0.0;
            for (var r = 0u; r < n; r++) {
                let c = p.y_offset + row0 + r;
                s += router[(e * p.y_stride + c) / 4u][c % 4u] * norm_w[c / 4u][c % 4u] * share_x[r];
            }
            add_share(p.route_at, e, ne, s);
        }
    }
    if (first) {
        for (var i = lid; i < 6u * ne; i += WG) {
            atomicStore(&shares[p.route_clear + i], 0u);
        }
    }
}

// The route kernels' whole work for workgroup `wgi` (matvec.wgsl's split): R g loaded ahead, the
// row pass, the rows stored and the shares added. Every invocation calls it, in uniform control
// flow.
fn product_with_shares(wgi: u32, inv: Invocation) {
    let threads = WG * RPT / ROWS;
    let slot = inv.lid / threads;
    let lane = inv.lid % threads;
    let row0 = wgi * ROWS;
    load_shares_ahead(row0, inv.lid);
    let sum = decode_rows(row0 + slot * RPT, lane, threads, inv);
    store_with_shares(sum, row0, slot, lane, wgi == 0u, inv.lid);
}
