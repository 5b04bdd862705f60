//! The router's product folded into a MoE layer's attention output in decode steps
//! (matvec_route.wgsl, common/route_share.wgsl): the attention output's matvec adds each
//! workgroup's shares of the router's logits into integer atomics as it writes x, and
//! moe_gate_up routes from them, so the step has no router dispatch.

use super::dispatch::{grid_2d, Cost, Dispatch, When};
#[cfg(test)]
use super::dispatch::{KernelBinds, StepUniform};
use super::mat::{
    check_cols, mat_cost_rule, GpuWeight, MatOpts, MatParams, WeightChunk, MAT_LAYOUT,
};
use super::shape::{MatvecShape, MATVEC_WG};
use crate::gpu::{layout_with, Binding, Gpu};
use crate::quant::GgmlType;
use crate::Result;

/// [`matvec_route`]'s bindings: the matrix products' (`mat::MAT_LAYOUT`; binding 8 the router's
/// weights), then 9 the shares.
const MAT_ROUTE_LAYOUT: &[Binding] = &layout_with::<10>(MAT_LAYOUT, &[Binding::ReadWrite]);

#[cfg(test)]
pub(crate) const BINDS: &[KernelBinds] = &[
    KernelBinds {
        stem: "matvec_route",
        layout: MAT_ROUTE_LAYOUT,
        unused: &[],
        uniforms: &[(4, size_of::<MatParams>()), (5, size_of::<StepUniform>())],
        constants: &[("WG", MATVEC_WG)],
    },
    KernelBinds {
        stem: "matvec_route_q8",
        layout: MAT_ROUTE_LAYOUT,
        unused: &[],
        uniforms: &[(4, size_of::<MatParams>()), (5, size_of::<StepUniform>())],
        constants: &[("WG", MATVEC_WG)],
    },
];

/// Most workgroups whose router shares one slot may sum (common/route_share.wgsl: a limb's
/// sum stays below 2^32).
const ROUTE_SHARE_MAX_WORKGROUPS: u32 = 4096;

/// The router's product folded into a MoE layer's attention output ([`matvec_route`]): `router`
/// (`[n_expert, n_embd]`, F32) and the FFN norm's weights `norm`, read by the product's epilogue,
/// which adds each workgroup's shares of the logits into slot `at` of `shares` and clears slot
/// `clear` (the folded layer before it, whose moe_gate_up has read it); moe_gate_up then routes
/// the decode step from slot `at` ([`moe::gate_up`](super::moe::gate_up)). Slots are
/// [`route_slot_words`] long; `shares` starts zeroed.
#[derive(Clone, Copy)]
pub struct RouteShare<'a> {
    pub router: &'a GpuWeight,
    pub norm: &'a wgpu::Buffer,
    pub shares: &'a wgpu::Buffer,
    pub at: u32,
    pub clear: u32,
}

/// Words of one slot of router shares for `n_expert` experts (common/route_share.wgsl).
pub fn route_slot_words(n_expert: u32) -> u32 {
    6 * n_expert
}

/// Whether the router `router` can fold into the decode product over `w` ([`matvec_route`]) in
/// `shape` (`None`: the adapter's choice): one F32 chunk as wide as `w`'s output, `w`'s chunks
/// starting on whole vec4s of it, and their decode workgroups at most [`MATVEC_WG`] rows each
/// and [`ROUTE_SHARE_MAX_WORKGROUPS`] in all.
pub fn route_share_fits(
    gpu: &Gpu,
    w: &GpuWeight,
    router: &GpuWeight,
    shape: Option<MatvecShape>,
) -> bool {
    let one_f32 = matches!(router.chunks.as_slice(), [c] if c.ty == GgmlType::F32);
    one_f32
        && router.n_cols == w.n_rows
        && w.n_rows.is_multiple_of(4)
        && w.chunks.iter().all(|c| {
            let rows = route_shape(gpu, w, c, shape).workgroup_rows();
            c.row0.is_multiple_of(4)
                && rows <= MATVEC_WG
                && c.n_rows.div_ceil(rows) <= ROUTE_SHARE_MAX_WORKGROUPS
        })
}

/// The decode shape of chunk `c` of `w`: `shape`, or the adapter's choice.
fn route_shape(
    gpu: &Gpu,
    w: &GpuWeight,
    c: &WeightChunk,
    shape: Option<MatvecShape>,
) -> MatvecShape {
    shape.unwrap_or_else(|| MatvecShape::for_matrix(gpu, c.n_rows, w.n_cols, c.ty))
}

/// Decode steps' `y += W x` with the router's shares in the epilogue (matvec_route.wgsl): the
/// attention output of a MoE layer whose router `share` folds in ([`route_share_fits`]), in
/// `shape` as for [`mat`](super::mat::mat)'s decode. Only for passes of one token; the others
/// take `mat`. One dispatch per weight chunk.
#[allow(clippy::too_many_arguments)]
pub fn matvec_route(
    gpu: &Gpu,
    w: &GpuWeight,
    x: &wgpu::Buffer,
    y: &wgpu::Buffer,
    step: &wgpu::Buffer,
    dummy: &wgpu::Buffer,
    share: &RouteShare,
    shape: Option<MatvecShape>,
) -> Result<Vec<Dispatch>> {
    check_cols(w)?;
    if !route_share_fits(gpu, w, share.router, shape) {
        return Err(crate::Error::InvalidArgument(format!(
            "{}: the router {} does not fold into it",
            w.name, share.router.name
        )));
    }
    let n_expert = share.router.n_rows;
    let opts = MatOpts {
        accumulate: true,
        when: When::Decode,
        ..Default::default()
    };
    let mut out = Vec::new();
    for chunk in &w.chunks {
        let shape = route_shape(gpu, w, chunk, shape);
        let rows = shape.workgroup_rows();
        let key = shape.rows_key(
            gpu,
            shape.kernel("matvec_route", chunk.ty)?,
            MAT_ROUTE_LAYOUT,
        )?;
        let params = MatParams {
            route_experts: n_expert,
            route_at: share.at,
            route_clear: share.clear,
            ..MatParams::of_chunk(w, chunk, &opts)
        };
        let pbuf = gpu.uniform(&w.name, &params);
        let router = &share.router.chunks[0].buffer;
        let n_rows = chunk.n_rows;
        let cost = mat_cost_rule(chunk, w.n_cols, &opts);
        let router_bytes = router.size() * chunk.n_rows as u64 / w.n_rows as u64;
        out.push(
            Dispatch::one(
                gpu,
                &w.name,
                &key,
                &[
                    &chunk.buffer,
                    x,
                    y,
                    dummy,
                    &pbuf,
                    step,
                    share.norm,
                    &chunk.buffer,
                    router,
                    share.shares,
                ],
                When::Decode,
                move |_| grid_2d(n_rows.div_ceil(rows)),
            )?
            .costs(move |s| {
                let c = cost(s);
                Cost {
                    bytes: c.bytes + router_bytes as f64,
                    ..c
                }
            }),
        );
    }
    Ok(out)
}
