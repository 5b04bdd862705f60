//! Sampling on the GPU: repetition penalty, top-k, top-p, min-p, temperature and the draw
//! (sample_topk.wgsl, sample.wgsl).

use bytemuck::{Pod, Zeroable};

#[cfg(test)]
use super::dispatch::KernelBinds;
use super::dispatch::{f32s, key, Cost, Dispatch, When};
use crate::gpu::{Binding, Gpu};
use crate::Result;

const SAMPLE_TOPK_LAYOUT: &[Binding] = &[
    Binding::Read,
    Binding::Read,
    Binding::ReadWrite,
    Binding::Uniform,
];
const SAMPLE_LAYOUT: &[Binding] = &[Binding::Read, Binding::ReadWrite, Binding::Uniform];

/// Logits per stage-1 workgroup and candidates each keeps (SLICE and K in the WGSL).
const SAMPLE_SLICE: u32 = 2048;
const SAMPLE_K: u32 = 64;
/// Most candidates stage 2 merges (256 threads x 32).
const SAMPLE_MAX_CANDIDATES: u32 = 8192;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct SampleTopkParams {
    n_vocab: u32,
    row: u32,
    n_history: u32,
    penalty: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct SampleParams {
    n_cand: u32,
    top_k: u32,
    top_p: f32,
    min_p: f32,
    temp: f32,
    u: f32,
    row: u32,
    _pad: u32,
}

#[cfg(test)]
pub(crate) const BINDS: &[KernelBinds] = &[
    KernelBinds {
        stem: "sample_topk",
        layout: SAMPLE_TOPK_LAYOUT,
        unused: &[],
        uniforms: &[(3, size_of::<SampleTopkParams>())],
        constants: &[("SLICE", SAMPLE_SLICE), ("K", SAMPLE_K)],
    },
    KernelBinds {
        stem: "sample",
        layout: SAMPLE_LAYOUT,
        unused: &[],
        uniforms: &[(2, size_of::<SampleParams>())],
        constants: &[("K", SAMPLE_K), ("PER", SAMPLE_MAX_CANDIDATES / 256)],
    },
];

/// The two sampling dispatches and the buffers the host updates before each sampled pass.
pub struct SampleKernels {
    pub dispatches: [Dispatch; 2],
    history: wgpu::Buffer,
    topk_params: wgpu::Buffer,
    params: wgpu::Buffer,
    n_vocab: u32,
    row: u32,
}

/// Sampling of `logits[row, :]` into `tokens[row]` (see wgsl/sample_topk.wgsl, wgsl/sample.wgsl).
pub fn sample(
    gpu: &Gpu,
    logits: &wgpu::Buffer,
    tokens: &wgpu::Buffer,
    n_vocab: u32,
    row: u32,
) -> Result<SampleKernels> {
    let groups = n_vocab.div_ceil(SAMPLE_SLICE);
    if groups * SAMPLE_K > SAMPLE_MAX_CANDIDATES {
        return Err(crate::Error::InvalidArgument(format!(
            "sampling on the GPU handles vocabularies up to {} tokens, not {n_vocab}",
            SAMPLE_MAX_CANDIDATES / SAMPLE_K * SAMPLE_SLICE
        )));
    }
    let cand = gpu.storage("sample candidates", (groups * SAMPLE_K) as u64 * 8)?;
    let history = gpu.storage(
        "sample history",
        crate::sampling::MAX_REPEAT_LAST_N as u64 * 4,
    )?;
    let topk_params = gpu.uniform(
        "sample_topk",
        &SampleTopkParams {
            n_vocab,
            row,
            n_history: 0,
            penalty: 1.0,
        },
    );
    let params = gpu.uniform("sample", &SampleParams::zeroed());
    Ok(SampleKernels {
        dispatches: [
            Dispatch::one(
                gpu,
                "sample_topk",
                &key("sample_topk".into(), SAMPLE_TOPK_LAYOUT),
                &[logits, &history, &cand, &topk_params],
                When::Always,
                move |_| [groups, 1, 1],
            )?
            // The logits row.
            .costs(move |_| Cost::reads(f32s(n_vocab as u64))),
            Dispatch::one(
                gpu,
                "sample",
                &key("sample".into(), SAMPLE_LAYOUT),
                &[&cand, tokens, &params],
                When::Always,
                |_| [1, 1, 1],
            )?
            // The candidates (value, id).
            .costs(move |_| Cost::reads(f32s(2 * (groups * SAMPLE_K) as u64))),
        ],
        history,
        topk_params,
        params,
        n_vocab,
        row,
    })
}

impl SampleKernels {
    /// Sets the parameters, the recent tokens (the last `repeat_last_n` of `history`) and the
    /// random number for the next sampled pass.
    pub fn prepare(
        &self,
        gpu: &Gpu,
        params: &crate::sampling::SamplerParams,
        history: &[u32],
        u: f32,
    ) {
        let n = (params.repeat_last_n.min(crate::sampling::MAX_REPEAT_LAST_N) as usize)
            .min(history.len());
        let recent = &history[history.len() - n..];
        if n > 0 {
            gpu.queue
                .write_buffer(&self.history, 0, bytemuck::cast_slice(recent));
        }
        gpu.queue.write_buffer(
            &self.topk_params,
            0,
            bytemuck::bytes_of(&SampleTopkParams {
                n_vocab: self.n_vocab,
                row: self.row,
                n_history: n as u32,
                penalty: params.repeat_penalty,
            }),
        );
        gpu.queue.write_buffer(
            &self.params,
            0,
            bytemuck::bytes_of(&SampleParams {
                n_cand: self.n_vocab.div_ceil(SAMPLE_SLICE) * SAMPLE_K,
                top_k: params.effective_top_k(),
                top_p: params.top_p,
                min_p: params.min_p,
                temp: params.temperature.max(1e-6),
                u,
                row: self.row,
                _pad: 0,
            }),
        );
    }
}
