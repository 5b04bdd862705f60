//! The gated activation `act(gate) * up` of a batched FFN (glu.wgsl), and the [`Activation`]s
//! the fused kernels (matvec_glu, the MoE experts) apply too.

use bytemuck::{Pod, Zeroable};

use super::dispatch::{f32s, grid_2d, key, Cost, Dispatch, When};
#[cfg(test)]
use super::dispatch::{KernelBinds, StepUniform};
use crate::gpu::{Binding, Gpu};
use crate::Result;

const GLU_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::Uniform,
    Binding::Uniform,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    Silu,
    GeluTanh,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct GluParams {
    n: u32,
    act: u32,
    stride: u32,
    up_offset: u32,
}

#[cfg(test)]
pub(crate) const BINDS: &[KernelBinds] = &[KernelBinds {
    stem: "glu",
    layout: GLU_LAYOUT,
    unused: &[],
    uniforms: &[(3, size_of::<GluParams>()), (4, size_of::<StepUniform>())],
    constants: &[],
}];

/// `h = act(gate) * up`, elementwise over `n` values per token, reading gate and up from the
/// stacked output `gate_up` `[n_tokens, 2n]` of the stacked FFN weight.
pub fn glu(
    gpu: &Gpu,
    gate_up: &wgpu::Buffer,
    h: &wgpu::Buffer,
    step: &wgpu::Buffer,
    n: u32,
    act: Activation,
    when: When,
) -> Result<Dispatch> {
    let params = GluParams {
        n,
        act: (act == Activation::GeluTanh) as u32,
        stride: 2 * n,
        up_offset: n,
    };
    let pbuf = gpu.uniform("glu", &params);
    Dispatch::one(
        gpu,
        "glu",
        &key("glu".into(), GLU_LAYOUT),
        &[gate_up, gate_up, h, &pbuf, step],
        when,
        move |s| grid_2d((s.n_tokens * n).div_ceil(256)),
    )
    .map(|d| d.costs(move |s| Cost::reads(f32s(2 * s.n_tokens as u64 * n as u64))))
}
