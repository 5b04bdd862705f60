//! Routing: the router's top-k and weights from its logits, into `[n_tokens, k, 2]` (expert id,
//! weight) on the GPU, and for batched passes the token lists per expert.

use bytemuck::{Pod, Zeroable};

use super::super::{f32s, key, Cost, Dispatch, When, IN2_OUT_LAYOUT, IN_OUT_LAYOUT};
#[cfg(test)]
use super::super::{KernelBinds, StepUniform};
use crate::gpu::Gpu;
use crate::{Error, Result};

/// Most experts a layer may have (MAX_E in moe_router.wgsl and moe_sort.wgsl).
pub const MAX_EXPERTS: u32 = 1024;
/// Most expert groups (MAX_G in common/route.wgsl).
pub const MAX_GROUPS: u32 = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gating {
    /// Softmax over all experts, weights from the softmax (qwen3moe).
    Softmax,
    /// Sigmoid scores; selection by score + bias, weights from the unbiased scores (glm4moe).
    Sigmoid,
}

/// How a layer routes its tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Routing {
    pub n_expert: u32,
    /// Experts per token.
    pub k: u32,
    pub gating: Gating,
    /// Renormalise the k weights to sum 1 (`expert_weights_norm`).
    pub norm: bool,
    /// Weights multiplier (`expert_weights_scale`; 1 when absent).
    pub scale: f32,
    /// Expert groups (1: no group limit) and groups kept per token.
    pub n_group: u32,
    pub topk_group: u32,
}

impl Routing {
    pub fn check(&self) -> Result<()> {
        let ok = self.n_expert > 0
            && self.n_expert <= MAX_EXPERTS
            && self.k > 0
            && self.k <= self.n_expert
            && self.n_group > 0
            && self.n_group <= MAX_GROUPS
            && self.n_expert.is_multiple_of(self.n_group)
            && (self.n_group == 1 || (self.topk_group > 0 && self.topk_group <= self.n_group))
            && (self.n_group == 1 || self.n_expert / self.n_group >= 2);
        if ok {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "unsupported expert routing {self:?} (at most {MAX_EXPERTS} experts, {MAX_GROUPS} groups)"
            )))
        }
    }

    /// Whether decode steps route in moe_gate_up's prologue, with no moe_router dispatch: layers
    /// of at most [`ROUTE_IN_GATE_UP_MAX`] experts.
    pub fn routes_in_gate_up(&self) -> bool {
        self.n_expert <= ROUTE_IN_GATE_UP_MAX
    }
}

/// Most experts a layer may have for moe_gate_up to route a decode step's token itself (`MAX_E`
/// there): decode steps over such layers skip moe_router.
pub const ROUTE_IN_GATE_UP_MAX: u32 = 256;

/// `RouteParams` of common/route.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(crate) struct RouterParams {
    n_expert: u32,
    k: u32,
    gating: u32,
    flags: u32,
    n_group: u32,
    topk_group: u32,
    scale: f32,
    _pad: u32,
}

impl RouterParams {
    pub(crate) fn new(r: &Routing, with_bias: bool) -> RouterParams {
        RouterParams {
            n_expert: r.n_expert,
            k: r.k,
            gating: (r.gating == Gating::Sigmoid) as u32,
            flags: r.norm as u32 | (with_bias as u32) << 1,
            n_group: r.n_group,
            topk_group: if r.n_group > 1 { r.topk_group } else { 1 },
            scale: r.scale,
            _pad: 0,
        }
    }
}

/// Top-k and weights for every token of the pass: `route[t, j] = (id, weight)` from
/// `logits[t, :]` (`[n_tokens, n_expert]`). `bias` is the selection bias (`exp_probs_b`).
pub fn router(
    gpu: &Gpu,
    logits: &wgpu::Buffer,
    bias: Option<&wgpu::Buffer>,
    route: &wgpu::Buffer,
    step: &wgpu::Buffer,
    dummy: &wgpu::Buffer,
    r: &Routing,
) -> Result<Dispatch> {
    r.check()?;
    let params = RouterParams::new(r, bias.is_some());
    let pbuf = gpu.uniform("moe_router", &params);
    Dispatch::one(
        gpu,
        "moe_router",
        &key("moe_router".into(), IN2_OUT_LAYOUT),
        &[logits, bias.unwrap_or(dummy), route, &pbuf, step],
        When::Always,
        |s| [s.n_tokens, 1, 1],
    )
    .map(|d| {
        let n_expert = r.n_expert as u64;
        d.costs(move |s| Cost::reads(f32s(s.n_tokens as u64 * n_expert)))
    })
}

/// u32 words of the per-expert token lists of a pass of up to `max_tokens` (moe_sort.wgsl).
pub fn lists_len(n_expert: u32, k: u32, max_tokens: u32) -> u64 {
    n_expert as u64 + 1 + max_tokens as u64 * k as u64
}

/// The tokens routed to each expert, for the batched expert kernels (batched passes only).
pub fn sort(
    gpu: &Gpu,
    route: &wgpu::Buffer,
    lists: &wgpu::Buffer,
    step: &wgpu::Buffer,
    r: &Routing,
) -> Result<Dispatch> {
    let pbuf = gpu.uniform("moe_sort", &[r.n_expert, r.k, 0, 0]);
    Dispatch::one(
        gpu,
        "moe_sort",
        &key("moe_sort".into(), IN_OUT_LAYOUT),
        &[route, lists, &pbuf, step],
        When::MoreThan(super::PER_ROUTE_MAX),
        |_| [1, 1, 1],
    )
    .map(|d| {
        let k = r.k as u64;
        d.costs(move |s| Cost::reads(f32s(2 * k * s.n_tokens as u64)))
    })
}

/// What the routing kernels bind (moe_sort takes `[u32; 4]` parameters).
#[cfg(test)]
pub(crate) const BINDS: &[KernelBinds] = &[
    KernelBinds {
        stem: "moe_router",
        layout: IN2_OUT_LAYOUT,
        unused: &[],
        uniforms: &[
            (3, size_of::<RouterParams>()),
            (4, size_of::<StepUniform>()),
        ],
        constants: &[("MAX_E", MAX_EXPERTS), ("MAX_G", MAX_GROUPS)],
    },
    KernelBinds {
        stem: "moe_sort",
        layout: IN_OUT_LAYOUT,
        unused: &[],
        uniforms: &[(2, size_of::<[u32; 4]>()), (3, size_of::<StepUniform>())],
        constants: &[("MAX_E", MAX_EXPERTS)],
    },
];
