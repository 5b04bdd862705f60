//! RoPE, the q/k norm and the KV-cache store (rope_store.wgsl), and the head geometry
//! ([`Heads`], [`KvBuffers`]) the attention kernels share.

use bytemuck::{Pod, Zeroable};

use super::dispatch::{f32s, key, Cost, Dispatch, When};
#[cfg(test)]
use super::dispatch::{KernelBinds, StepUniform};
use crate::gpu::{Binding, Gpu};
use crate::Result;

const ROPE_LAYOUT: &[Binding] = &[
    Binding::ReadWrite,
    Binding::ReadWrite,
    Binding::ReadWrite,
    Binding::Read,
    Binding::Read,
    Binding::Uniform,
    Binding::Uniform,
    Binding::Read,
];

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeConfig {
    /// Rotated elements per head (partial rotary when below the head size).
    pub n_rot: u32,
    /// NeoX layout (rotate halves) rather than GGML's normal layout (adjacent pairs).
    pub neox: bool,
    pub theta_base: f32,
    /// 1 / linear scaling factor.
    pub freq_scale: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct RopeParams {
    n_head: u32,
    n_kv_head: u32,
    head_dim: u32,
    n_rot: u32,
    ctx: u32,
    mode: u32,
    theta_base: f32,
    freq_scale: f32,
    eps: f32,
    flags: u32,
    _pad: [u32; 2],
}

#[cfg(test)]
pub(crate) const BINDS: &[KernelBinds] = &[KernelBinds {
    stem: "rope_store",
    layout: ROPE_LAYOUT,
    unused: &[],
    uniforms: &[(5, size_of::<RopeParams>()), (6, size_of::<StepUniform>())],
    constants: &[],
}];

/// Head geometry shared by the attention kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heads {
    pub n_head: u32,
    pub n_kv_head: u32,
    pub head_dim: u32,
    /// KV-cache capacity in positions.
    pub ctx: u32,
}

/// What the KV cache holds: f16 (the default, as llama.cpp's; wgsl/common/kv_f16.wgsl) or f32
/// (the `_kv32` kernel variants).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KvType {
    #[default]
    F16,
    F32,
}

impl KvType {
    /// Bytes a cached element takes.
    pub fn bytes(self) -> u64 {
        match self {
            KvType::F16 => 2,
            KvType::F32 => 4,
        }
    }

    /// The kernel variant of `base` that reads and writes this cache.
    pub(crate) fn variant(self, base: String) -> String {
        match self {
            KvType::F16 => base,
            KvType::F32 => base + "_kv32",
        }
    }
}

pub struct KvBuffers<'a> {
    /// The QKV projection's output: per token the Q heads, then K, then V.
    pub qkv: &'a wgpu::Buffer,
    /// The caches, `[n_seq, n_kv_head, ctx, head_dim]` each (a sequence per session of a
    /// [`SessionSet`](crate::model::SessionSet); 1 for a session of its own).
    pub k_cache: &'a wgpu::Buffer,
    pub v_cache: &'a wgpu::Buffer,
    pub kv: KvType,
}

/// Q/K norm (when `qk_norm` gives the weights), RoPE (Q in place in `qkv`), and the K/V cache
/// store for the pass, each row at its sequence and position (the step uniform, or the row table
/// `rows` of [`Row`](super::Row)s).
#[allow(clippy::too_many_arguments)]
pub fn rope_store(
    gpu: &Gpu,
    b: &KvBuffers,
    step: &wgpu::Buffer,
    rows: &wgpu::Buffer,
    heads: Heads,
    rope: RopeConfig,
    qk_norm: Option<(&wgpu::Buffer, &wgpu::Buffer, f32)>,
    dummy: &wgpu::Buffer,
) -> Result<Dispatch> {
    let params = RopeParams {
        n_head: heads.n_head,
        n_kv_head: heads.n_kv_head,
        head_dim: heads.head_dim,
        n_rot: rope.n_rot,
        ctx: heads.ctx,
        mode: rope.neox as u32,
        theta_base: rope.theta_base,
        freq_scale: rope.freq_scale,
        eps: qk_norm.map_or(0.0, |n| n.2),
        flags: qk_norm.is_some() as u32,
        _pad: [0; 2],
    };
    let pbuf = gpu.uniform("rope", &params);
    let (qn, kn) = qk_norm.map_or((dummy, dummy), |n| (n.0, n.1));
    let slots = heads.n_head + 2 * heads.n_kv_head;
    Dispatch::one(
        gpu,
        "rope_store",
        &key(b.kv.variant("rope_store".into()), ROPE_LAYOUT),
        &[b.qkv, b.k_cache, b.v_cache, qn, kn, &pbuf, step, rows],
        When::Always,
        move |s| [slots, s.n_tokens, 1],
    )
    .map(|d| {
        // The q, k and v rows of each token.
        let per_token = (slots * heads.head_dim) as u64;
        d.costs(move |s| Cost::reads(f32s(s.n_tokens as u64 * per_token)))
    })
}
