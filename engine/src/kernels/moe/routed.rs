//! One MoE FFN's routed part in the one dispatch order the model's recipe and the kernel tests
//! share, and the scratch buffers it runs on.

use super::{
    combine, down, down_batch, gate_up, gate_up_batch, lists_len, router, sort, Activation,
    GpuExperts, MatvecShape, Routing, When,
};
use crate::gpu::Gpu;
use crate::kernels::mat::to_f16;
use crate::kernels::route_slot_words;
use crate::kernels::{Dispatch, Rows};
use crate::{Error, Result};

/// Scratch buffers of one MoE FFN for passes of up to `max_tokens` tokens (shareable by all
/// layers of a model).
#[derive(Clone)]
pub struct MoeBuffers {
    pub logits: wgpu::Buffer, // [max_tokens, n_expert]
    pub route: wgpu::Buffer,  // [max_tokens, k, 2] u32
    pub lists: wgpu::Buffer,  // lists_len(n_expert, k, max_tokens) u32
    pub h: wgpu::Buffer,      // [max_tokens * k, n_ff], f16 in prompt chunks on the matrix units
    pub xh: wgpu::Buffer,     // [max_tokens, n_embd] f16: those chunks' normalised x
    pub o: wgpu::Buffer,      // [max_tokens * k, n_embd]
    /// The router's shares of decode steps, `share_slots` slots (kernels::RouteShare).
    pub shares: wgpu::Buffer,
}

impl MoeBuffers {
    pub fn new(
        gpu: &Gpu,
        r: &Routing,
        n_embd: u32,
        n_ff: u32,
        max_tokens: u32,
        share_slots: u32,
    ) -> Result<Self> {
        let t = max_tokens as u64;
        let slots = t * r.k as u64;
        let need = slots * n_embd.max(n_ff) as u64 * 4;
        if need > gpu.max_binding() {
            return Err(Error::Limits {
                what:
                    "a storage binding for the routed experts' activations (lower the batch size)"
                        .into(),
                need,
                have: gpu.max_binding(),
            });
        }
        Ok(MoeBuffers {
            logits: gpu.storage("moe logits", t * r.n_expert as u64 * 4)?,
            route: gpu.storage("moe route", slots * 8)?,
            lists: gpu.storage("moe lists", lists_len(r.n_expert, r.k, max_tokens) * 4)?,
            h: gpu.storage("moe h", slots * n_ff as u64 * 4)?,
            xh: gpu.storage(
                "moe x f16",
                if gpu.features.coop {
                    t * n_embd as u64 * 2
                } else {
                    16
                },
            )?,
            o: gpu.storage("moe o", slots * n_embd as u64 * 4)?,
            shares: gpu.storage(
                "moe router shares",
                share_slots as u64 * route_slot_words(r.n_expert) as u64 * 4,
            )?,
        })
    }
}

/// The routed part of one MoE FFN after the router logits are in `b.logits`: the decode kernels
/// for passes of up to [`PER_ROUTE_MAX`] tokens (reading `x_dec`, with the norm prologue when
/// `norm` is given), the batched kernels for longer ones (reading the normalised `x_batch`),
/// accumulating into `residual`; the decode kernels in `shape` (as for [`gate_up`]), decode steps
/// routed from the router's shares in `b.shares` at the slot `share_at` where given (as for
/// [`gate_up`]). The one MoE
/// dispatch order: the model's recipe (`model/recipe.rs`) and the kernel tests both record it
/// through here.
#[allow(clippy::too_many_arguments)]
pub fn routed(
    gpu: &Gpu,
    r: &Routing,
    bias: Option<&wgpu::Buffer>,
    gate_up_w: &GpuExperts,
    down_w: &GpuExperts,
    x_dec: &wgpu::Buffer,
    norm: Option<(&wgpu::Buffer, f32)>,
    x_batch: &wgpu::Buffer,
    residual: &wgpu::Buffer,
    b: &MoeBuffers,
    share_at: Option<u32>,
    step: &wgpu::Buffer,
    dummy: &wgpu::Buffer,
    act: Activation,
    shape: Option<MatvecShape>,
) -> Result<Vec<Dispatch>> {
    let mut routing = router(gpu, &b.logits, bias, &b.route, step, dummy, r)?;
    if r.routes_in_gate_up() {
        routing = routing.only(When::Batch);
    }
    let mut d = vec![routing];
    d.extend(gate_up(
        gpu,
        gate_up_w,
        x_dec,
        &b.h,
        (&b.logits, bias, &b.route),
        share_at.map(|at| (&b.shares, at)),
        dummy,
        norm,
        r,
        act,
        shape,
    )?);
    d.extend(down(gpu, down_w, &b.h, residual, &b.route, r, shape)?);
    d.push(sort(gpu, &b.route, &b.lists, step, r)?);
    if gpu.features.coop {
        let n_embd = gate_up_w.n_cols;
        d.push(to_f16(
            gpu,
            x_batch,
            &b.xh,
            step,
            n_embd,
            Rows::Tokens,
            When::Always,
        )?);
    }
    d.extend(gate_up_batch(
        gpu, gate_up_w, x_batch, &b.xh, &b.h, &b.lists, r, act,
    )?);
    d.extend(down_batch(gpu, down_w, &b.h, &b.o, &b.lists, &b.route, r)?);
    d.push(combine(gpu, &b.o, residual, step, down_w.rows, r)?);
    Ok(d)
}
