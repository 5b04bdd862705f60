//! Mixture-of-Experts on the GPU: routing (top-k and weights from the router logits), the routed
//! experts' gate/up/activation and down/weight/sum kernels for decode, and their batched forms
//! that read each selected expert once per pass. Router output (expert ids and weights) lives in
//! a storage buffer `[n_tokens, k, 2]` and is never read back.
//!
//! One MoE FFN, given the normalised input (or the raw residual with the norm in the decode
//! prologue):
//! ```text
//! decode (one token):          router -> moe_gate_up (routing in its prologue)
//!                              -> moe_down (+= x)                                          3 dispatches
//! up to PER_ROUTE_MAX tokens:  router -> moe_router -> moe_gate_up -> moe_down (+= x)      4 dispatches
//! more:                        router -> moe_router -> moe_sort -> moe_gate_up_batch
//!                              -> moe_down_batch -> moe_combine (+= x)                     6 dispatches
//! ```
//! (one expert dispatch more per extra weight chunk; see [`GpuExperts`]; layers of more than
//! [`ROUTE_IN_GATE_UP_MAX`] experts keep moe_router before moe_gate_up). In a model's decode
//! steps the router's product is usually not a dispatch of its own either: the attention output
//! before it sums it as it writes x (`kernels::matvec_route`), and moe_gate_up routes from
//! those shares (2 dispatches).

use bytemuck::{Pod, Zeroable};

use super::{
    f32s, grid_2d, key, qtype_suffix, Activation, Cost, Dispatch, MatvecShape, StepInfo, When,
    IN_OUT_LAYOUT,
};
#[cfg(test)]
use super::{shape::MATVEC_WG, KernelBinds, StepUniform};
use crate::gpu::{Binding, Gpu};
use crate::{Error, Result};

mod experts;
mod routed;
mod routing;

pub use experts::{ExpertChunk, GpuExperts};
pub use routed::{routed, MoeBuffers};
use routing::RouterParams;
#[cfg(test)]
pub(crate) use routing::BINDS as ROUTING_BINDS;
pub use routing::{
    lists_len, router, sort, Gating, Routing, MAX_EXPERTS, MAX_GROUPS, ROUTE_IN_GATE_UP_MAX,
};

// ---------------------------------------------------------------------------------------------
// experts

/// Passes of at most this many tokens (decode, speculative verification, a few serve streams)
/// run the decode expert kernels over every route: an expert that two of the pass's tokens chose
/// is read twice, the second time mostly from the cache, as the routes run in one dispatch, and
/// the pass skips the sort and the combine. Longer passes sort the routes by expert and read
/// each chosen expert once for all its tokens. On the H200 (Qwen3-30B-A3B shape) the per-route
/// kernels take a 2-token pass's experts from 9.6 to 3.4 ms, are even with the sorted ones at 8
/// tokens and 62% slower at 16 (bench/RESULTS.md, seventeenth session).
pub(crate) const PER_ROUTE_MAX: u32 = 8;

/// Experts of a chunk of `n_exp` (of a layer's `n_expert`) that a pass of `n` tokens, each routed
/// to `k`, reads: `k` for a decode token; for a batch the most it can be, `min(n_expert, k n)`
/// (every route to an expert no other route took; exact once every expert has a token, as in a
/// long prompt), in both cases spread over the chunks by their share of the experts.
pub(crate) fn routed_experts(n_expert: u32, k: u32, n_exp: u32, n: u32) -> f64 {
    (k as f64 * n as f64).min(n_expert as f64) * n_exp as f64 / n_expert as f64
}

/// The cost of an expert kernel over a chunk of `n_exp` experts of `rows` x `cols` taking
/// `chunk_bytes` on the GPU, in pass `s`: the [`routed_experts`] weights, `act` bytes of
/// activations, and `2 rows cols` FLOPs for each of the pass's `k n` routes (the chunk's share).
#[allow(clippy::too_many_arguments)]
pub(crate) fn expert_cost(
    chunk_bytes: u64,
    rows: u32,
    cols: u32,
    n_expert: u32,
    k: u32,
    n_exp: u32,
    s: &StepInfo,
    act: f64,
) -> Cost {
    let experts = routed_experts(n_expert, k, n_exp, s.n_tokens);
    let routes = k as f64 * s.n_tokens as f64 * n_exp as f64 / n_expert as f64;
    let weights = chunk_bytes as f64 / n_exp as f64 * experts;
    Cost::product(weights, act, rows, cols, routes)
}

fn check_experts(ex: &GpuExperts, r: &Routing, rows: u32, cols: u32) -> Result<()> {
    if ex.n_expert != r.n_expert || ex.rows != rows || ex.n_cols != cols || !cols.is_multiple_of(32)
    {
        return Err(Error::InvalidArgument(format!(
            "{}: {} experts of {} x {}, expected {} of {rows} x {cols} (a multiple of 32)",
            ex.name, ex.n_expert, ex.rows, ex.n_cols, r.n_expert
        )));
    }
    Ok(())
}

const GATE_UP_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::ReadWrite,
    Binding::Read,
    Binding::Uniform,
    Binding::Read,
    Binding::Read,
    Binding::Read,
];

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct GateUpParams {
    n_ff: u32,
    n_cols: u32,
    k: u32,
    e0: u32,
    n_exp: u32,
    act: u32,
    flags: u32,
    eps: f32,
    route: RouterParams,
    share_at: u32,
    _pad: [u32; 3],
}

/// Passes of up to [`PER_ROUTE_MAX`] tokens: `h[t k + j, :] = act(G_e x'[t]) * (U_e x'[t])` for
/// each token's k routes, over the stacked gate/up experts (`rows` = 2 n_ff); x' = RMSNorm(x) *
/// norm weights when `norm` is given. In decode steps over layers of at most
/// [`ROUTE_IN_GATE_UP_MAX`] experts the kernel routes the token itself from `logits` and `bias`
/// (what moe_router does) and writes `route` for moe_down; otherwise it reads `route`. With
/// `shares` (the shares buffer and the layer's slot, [`RouteShare`](super::route_share::RouteShare)),
/// those decode steps route from the router's shares that the attention output left, not
/// `logits` (and take the norm's scale from x: `norm` must be given). `shape`: rows per
/// workgroup and variant as for the matvec, or (`None`) the adapter's choice for the routes'
/// rows, `n_ff k` of them ([`MatvecShape::for_matrix`]). One dispatch per chunk.
#[allow(clippy::too_many_arguments)]
pub fn gate_up(
    gpu: &Gpu,
    ex: &GpuExperts,
    x: &wgpu::Buffer,
    h: &wgpu::Buffer,
    (logits, bias, route): (&wgpu::Buffer, Option<&wgpu::Buffer>, &wgpu::Buffer),
    shares: Option<(&wgpu::Buffer, u32)>,
    dummy: &wgpu::Buffer,
    norm: Option<(&wgpu::Buffer, f32)>,
    r: &Routing,
    act: Activation,
    shape: Option<MatvecShape>,
) -> Result<Vec<Dispatch>> {
    let n_ff = ex.rows / 2;
    let self_route = r.routes_in_gate_up();
    if shares.is_some() && !(self_route && norm.is_some()) {
        return Err(Error::InvalidArgument(format!(
            "{}: routing from the router's shares needs the decode routing and the norm prologue",
            ex.name
        )));
    }
    check_experts(ex, r, 2 * n_ff, ex.n_cols)?;
    let mut out = Vec::new();
    for c in &ex.chunks {
        let shape =
            shape.unwrap_or_else(|| MatvecShape::for_matrix(gpu, n_ff * r.k, ex.n_cols, c.ty));
        let rows = shape.workgroup_rows();
        let kernel = shape.kernel("moe_gate_up", c.ty)?;
        let pipeline_key = shape.rows_key(gpu, kernel, GATE_UP_LAYOUT)?;
        let params = GateUpParams {
            n_ff,
            n_cols: ex.n_cols,
            k: r.k,
            e0: c.e0,
            n_exp: c.n_exp,
            act: (act == Activation::GeluTanh) as u32,
            flags: (norm.is_some() as u32) << 2
                | (self_route as u32) << 3
                | (shares.is_some() as u32) << 4,
            eps: norm.map_or(0.0, |n| n.1),
            route: RouterParams::new(r, bias.is_some()),
            share_at: shares.map_or(0, |s| s.1),
            _pad: [0; 3],
        };
        let pbuf = gpu.uniform(&ex.name, &params);
        let k = r.k;
        let (bytes, cols, n_expert, n_exp) = (c.buffer.size(), ex.n_cols, r.n_expert, c.n_exp);
        // Each token's x and routes (and a decode step's router logits), the norm weights.
        let norm_cols = cols as u64 * norm.is_some() as u64;
        let logit_cols = n_expert as u64 * self_route as u64;
        out.push(
            Dispatch::one(
                gpu,
                &ex.name,
                &pipeline_key,
                &[
                    &c.buffer,
                    x,
                    h,
                    route,
                    norm.map_or(dummy, |n| n.0),
                    &pbuf,
                    &c.buffer,
                    shares.map_or(logits, |s| s.0),
                    bias.unwrap_or(dummy),
                ],
                When::AtMost(PER_ROUTE_MAX),
                move |s| [n_ff.div_ceil(rows), k * s.n_tokens, 1],
            )?
            .costs(move |s| {
                let logits = if s.n_tokens == 1 { logit_cols } else { 0 };
                let per_token = cols as u64 + 2 * k as u64 + logits;
                let act = f32s(s.n_tokens as u64 * per_token + norm_cols);
                expert_cost(bytes, 2 * n_ff, cols, n_expert, k, n_exp, s, act)
            }),
        );
    }
    Ok(out)
}

const DOWN_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::Read,
    Binding::Uniform,
    Binding::Read,
];

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct DownParams {
    n_rows: u32,
    n_cols: u32,
    k: u32,
    e0: u32,
    n_exp: u32,
    _pad: [u32; 3],
}

/// Passes of up to [`PER_ROUTE_MAX`] tokens: `x[t] += sum_j weight_j * D_{e_j} h[t k + j, :]`, in
/// `shape` as for [`gate_up`], or (`None`) the adapter's choice for rows over k routes
/// ([`MatvecShape::for_experts`]). One dispatch per chunk.
pub fn down(
    gpu: &Gpu,
    ex: &GpuExperts,
    h: &wgpu::Buffer,
    x: &wgpu::Buffer,
    route: &wgpu::Buffer,
    r: &Routing,
    shape: Option<MatvecShape>,
) -> Result<Vec<Dispatch>> {
    check_experts(ex, r, ex.rows, ex.n_cols)?;
    let mut out = Vec::new();
    for c in &ex.chunks {
        let q = qtype_suffix(c.ty)?;
        let shape =
            shape.unwrap_or_else(|| MatvecShape::for_experts(gpu, ex.rows, ex.n_cols, r.k, c.ty));
        let rows = shape.rows;
        let pipeline_key = shape.key(gpu, format!("moe_down_{q}"), DOWN_LAYOUT)?;
        let params = DownParams {
            n_rows: ex.rows,
            n_cols: ex.n_cols,
            k: r.k,
            e0: c.e0,
            n_exp: c.n_exp,
            _pad: [0; 3],
        };
        let pbuf = gpu.uniform(&ex.name, &params);
        let n_rows = ex.rows;
        let (bytes, cols, n_expert, n_exp, k) =
            (c.buffer.size(), ex.n_cols, r.n_expert, c.n_exp, r.k);
        // Per token: h of its routes, the routes, the x row it adds to.
        let per_token = k as u64 * (cols as u64 + 2) + n_rows as u64;
        out.push(
            Dispatch::one(
                gpu,
                &ex.name,
                &pipeline_key,
                &[&c.buffer, h, x, route, &pbuf, &c.buffer],
                When::AtMost(PER_ROUTE_MAX),
                move |s| {
                    let [x, y, _] = grid_2d(n_rows.div_ceil(rows));
                    [x, y, s.n_tokens]
                },
            )?
            .costs(move |s| {
                let act = f32s(s.n_tokens as u64 * per_token);
                expert_cost(bytes, n_rows, cols, n_expert, k, n_exp, s, act)
            }),
        );
    }
    Ok(out)
}

/// (weights, x, h, lists, parameters; for the matrix units' twin: the weights again as 16-byte
/// runs, x as f16).
const GATE_UP_BATCH_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::Read,
    Binding::Uniform,
    Binding::Read,
    Binding::Read,
];

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct GateUpBatchParams {
    n_ff: u32,
    n_cols: u32,
    k: u32,
    e0: u32,
    n_exp: u32,
    act: u32,
    n_expert: u32,
    _pad: u32,
}

/// Longer passes: `h[t k + j, :] = act(G_e x[t]) * (U_e x[t])` for every route, by expert
/// (`lists` from [`sort`]). `x` is already normalised. One dispatch per chunk; prompt chunks on
/// the matrix units where the adapter has them, which read x as f16 from `xh` and write h as f16
/// (for [`down_batch`]'s twin).
#[allow(clippy::too_many_arguments)]
pub fn gate_up_batch(
    gpu: &Gpu,
    ex: &GpuExperts,
    x: &wgpu::Buffer,
    xh: &wgpu::Buffer,
    h: &wgpu::Buffer,
    lists: &wgpu::Buffer,
    r: &Routing,
    act: Activation,
) -> Result<Vec<Dispatch>> {
    let n_ff = ex.rows / 2;
    check_experts(ex, r, 2 * n_ff, ex.n_cols)?;
    let mut out = Vec::new();
    for c in &ex.chunks {
        let q = qtype_suffix(c.ty)?;
        let params = GateUpBatchParams {
            n_ff,
            n_cols: ex.n_cols,
            k: r.k,
            e0: c.e0,
            n_exp: c.n_exp,
            act: (act == Activation::GeluTanh) as u32,
            n_expert: r.n_expert,
            _pad: 0,
        };
        let pbuf = gpu.uniform(&ex.name, &params);
        let n_exp = c.n_exp;
        let (bytes, cols, n_expert, k) = (c.buffer.size(), ex.n_cols, r.n_expert, r.k);
        out.push(
            Dispatch::one(
                gpu,
                format!("{} batch", ex.name),
                &key(format!("moe_gate_up_batch_{q}"), GATE_UP_BATCH_LAYOUT),
                &[&c.buffer, x, h, lists, &pbuf, &c.buffer, xh],
                When::MoreThan(PER_ROUTE_MAX),
                move |_| [n_ff.div_ceil(32), n_exp, 1],
            )?
            .long_passes(
                gpu,
                gpu.features
                    .coop
                    .then(|| key(format!("moe_gate_up_batch_coop_{q}"), GATE_UP_BATCH_LAYOUT))
                    .as_ref(),
            )?
            .costs(move |s| {
                // Each token's x once, the token lists.
                let n = s.n_tokens as u64;
                let act = f32s(n * cols as u64 + n_expert as u64 + 1 + n * k as u64);
                expert_cost(bytes, 2 * n_ff, cols, n_expert, k, n_exp, s, act)
            }),
        );
    }
    Ok(out)
}

/// (weights, h, o, lists, routes, parameters, the weights again as 16-byte runs: the matrix
/// units' twin's wide loads).
const DOWN_BATCH_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::Read,
    Binding::Read,
    Binding::Uniform,
    Binding::Read,
];

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct DownBatchParams {
    n_rows: u32,
    n_cols: u32,
    k: u32,
    e0: u32,
    n_exp: u32,
    n_expert: u32,
    _pad: [u32; 2],
}

/// What the expert kernels bind (moe_combine takes `[u32; 4]` parameters).
#[cfg(test)]
pub(crate) const BINDS: &[KernelBinds] = &[
    KernelBinds {
        stem: "moe_gate_up",
        layout: GATE_UP_LAYOUT,
        unused: &[],
        uniforms: &[(5, size_of::<GateUpParams>())],
        constants: &[("WG", MATVEC_WG), ("MAX_E", ROUTE_IN_GATE_UP_MAX)],
    },
    KernelBinds {
        stem: "moe_gate_up_q8",
        layout: GATE_UP_LAYOUT,
        unused: &[],
        uniforms: &[(5, size_of::<GateUpParams>())],
        constants: &[("WG", MATVEC_WG), ("MAX_E", ROUTE_IN_GATE_UP_MAX)],
    },
    KernelBinds {
        stem: "moe_down",
        layout: DOWN_LAYOUT,
        unused: &[],
        uniforms: &[(4, size_of::<DownParams>())],
        constants: &[("WG", MATVEC_WG)],
    },
    KernelBinds {
        stem: "moe_gate_up_batch",
        layout: GATE_UP_BATCH_LAYOUT,
        // The bind group is shared with the matrix units' twin, which alone reads 5 and 6.
        unused: &[5, 6],
        uniforms: &[(4, size_of::<GateUpBatchParams>())],
        constants: &[],
    },
    KernelBinds {
        stem: "moe_down_batch",
        layout: DOWN_BATCH_LAYOUT,
        // The bind group is shared with the matrix units' twin, which alone reads binding 6.
        unused: &[6],
        uniforms: &[(5, size_of::<DownBatchParams>())],
        constants: &[],
    },
    KernelBinds {
        stem: "moe_gate_up_batch_coop",
        layout: GATE_UP_BATCH_LAYOUT,
        unused: &[],
        uniforms: &[(4, size_of::<GateUpBatchParams>())],
        constants: &[],
    },
    KernelBinds {
        stem: "moe_down_batch_coop",
        layout: DOWN_BATCH_LAYOUT,
        unused: &[],
        uniforms: &[(5, size_of::<DownBatchParams>())],
        constants: &[],
    },
    KernelBinds {
        stem: "moe_combine",
        layout: IN_OUT_LAYOUT,
        unused: &[],
        uniforms: &[(2, size_of::<[u32; 4]>()), (3, size_of::<StepUniform>())],
        constants: &[],
    },
];

/// Longer passes: `o[t k + j, :] = weight * D_e h[t k + j, :]` for every route, by expert.
/// One dispatch per chunk; prompt chunks on the matrix units where the adapter has them.
#[allow(clippy::too_many_arguments)]
pub fn down_batch(
    gpu: &Gpu,
    ex: &GpuExperts,
    h: &wgpu::Buffer,
    o: &wgpu::Buffer,
    lists: &wgpu::Buffer,
    route: &wgpu::Buffer,
    r: &Routing,
) -> Result<Vec<Dispatch>> {
    check_experts(ex, r, ex.rows, ex.n_cols)?;
    let mut out = Vec::new();
    for c in &ex.chunks {
        let q = qtype_suffix(c.ty)?;
        let params = DownBatchParams {
            n_rows: ex.rows,
            n_cols: ex.n_cols,
            k: r.k,
            e0: c.e0,
            n_exp: c.n_exp,
            n_expert: r.n_expert,
            _pad: [0; 2],
        };
        let pbuf = gpu.uniform(&ex.name, &params);
        let (n_rows, n_exp) = (ex.rows, c.n_exp);
        let (bytes, cols, n_expert, k) = (c.buffer.size(), ex.n_cols, r.n_expert, r.k);
        out.push(
            Dispatch::one(
                gpu,
                format!("{} batch", ex.name),
                &key(format!("moe_down_batch_{q}"), DOWN_BATCH_LAYOUT),
                &[&c.buffer, h, o, lists, route, &pbuf, &c.buffer],
                When::MoreThan(PER_ROUTE_MAX),
                move |_| [n_rows.div_ceil(64), n_exp, 1],
            )?
            .long_passes(
                gpu,
                gpu.features
                    .coop
                    .then(|| key(format!("moe_down_batch_coop_{q}"), DOWN_BATCH_LAYOUT))
                    .as_ref(),
            )?
            .costs(move |s| {
                // h of every route, the token lists and routes.
                let routes = s.n_tokens as u64 * k as u64;
                let act = f32s(routes * (cols as u64 + 3) + n_expert as u64 + 1);
                expert_cost(bytes, n_rows, cols, n_expert, k, n_exp, s, act)
            }),
        );
    }
    Ok(out)
}

/// Longer passes: `x[t, :] += sum_j o[t k + j, :]`.
pub fn combine(
    gpu: &Gpu,
    o: &wgpu::Buffer,
    x: &wgpu::Buffer,
    step: &wgpu::Buffer,
    n_embd: u32,
    r: &Routing,
) -> Result<Dispatch> {
    let pbuf = gpu.uniform("moe_combine", &[n_embd, r.k, 0, 0]);
    Dispatch::one(
        gpu,
        "moe_combine",
        &key("moe_combine".into(), IN_OUT_LAYOUT),
        &[o, x, &pbuf, step],
        When::MoreThan(PER_ROUTE_MAX),
        move |s| grid_2d((s.n_tokens * n_embd).div_ceil(256)),
    )
    .map(|d| {
        let per_token = n_embd as u64 * (r.k as u64 + 1);
        d.costs(move |s| Cost::reads(f32s(s.n_tokens as u64 * per_token)))
    })
}
