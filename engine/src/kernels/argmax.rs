//! Greedy sampling on the GPU: argmax over a row of logits in two stages (argmax.wgsl,
//! argmax_combine.wgsl).

use bytemuck::{Pod, Zeroable};

#[cfg(test)]
use super::dispatch::KernelBinds;
use super::dispatch::{f32s, Cost, Dispatch, When, MAX_GRID};
use crate::gpu::{Binding, Gpu, PipelineKey};
use crate::Result;

/// (input, output, parameters): both argmax stages.
const ARGMAX_LAYOUT: &[Binding] = &[Binding::Read, Binding::ReadWrite, Binding::Uniform];

/// Logits per workgroup of argmax's stage 1 (`SLICE` in argmax.wgsl and argmax_combine.wgsl):
/// 4 per thread, so a 151936-token row spreads over 149 workgroups (an H200 has 132 SMs) and a
/// 49152-token one over 48, while stage 2 has few winners to merge.
const ARGMAX_SLICE: u32 = 1024;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct ArgmaxParams {
    n_vocab: u32,
    row: u32,
    _pad: [u32; 2],
}

#[cfg(test)]
pub(crate) const BINDS: &[KernelBinds] = &[
    KernelBinds {
        stem: "argmax",
        layout: ARGMAX_LAYOUT,
        unused: &[],
        uniforms: &[(2, size_of::<ArgmaxParams>())],
        constants: &[("SLICE", ARGMAX_SLICE)],
    },
    KernelBinds {
        stem: "argmax_combine",
        layout: ARGMAX_LAYOUT,
        unused: &[],
        uniforms: &[(2, size_of::<ArgmaxParams>())],
        constants: &[("SLICE", ARGMAX_SLICE)],
    },
];

/// Words (u32) of the scratch buffer that argmax's stage 1 writes its per-slice winners to, one
/// (f32 bits, id) pair per slice of `ARGMAX_SLICE` logits; allocate it once with the
/// activations.
pub fn argmax_partial_len(n_vocab: u32) -> u64 {
    2 * n_vocab.div_ceil(ARGMAX_SLICE).max(1) as u64
}

/// `tokens[0] = argmax(logits[row, :])`, the lowest id on ties, in two dispatches: one
/// workgroup per slice of the row into `partial` ([`argmax_partial_len`] words), then one
/// workgroup over the slices' winners. One workgroup over the whole row could not pull memory
/// fast enough (215 µs for 151936 logits on an H200); the second dispatch costs one dependent
/// launch (~3.6 µs there, MEASURE.md).
pub fn argmax(
    gpu: &Gpu,
    logits: &wgpu::Buffer,
    tokens: &wgpu::Buffer,
    partial: &wgpu::Buffer,
    n_vocab: u32,
    row: u32,
) -> Result<[Dispatch; 2]> {
    let groups = n_vocab.div_ceil(ARGMAX_SLICE).max(1);
    if groups > MAX_GRID {
        return Err(crate::Error::InvalidArgument(format!(
            "argmax handles vocabularies up to {} tokens, not {n_vocab}",
            MAX_GRID as u64 * ARGMAX_SLICE as u64
        )));
    }
    if partial.size() < argmax_partial_len(n_vocab) * 4 {
        return Err(crate::Error::InvalidArgument(format!(
            "argmax of {n_vocab} logits needs a partial buffer of {} bytes, not {}",
            argmax_partial_len(n_vocab) * 4,
            partial.size()
        )));
    }
    let pbuf = gpu.uniform(
        "argmax",
        &ArgmaxParams {
            n_vocab,
            row,
            _pad: [0; 2],
        },
    );
    // Bytes each stage reads: the logits row, then the slices' (value, index) winners.
    let stage = |shader: &str, buffers: &[&wgpu::Buffer], n: u32, bytes: f64| {
        Dispatch::one(
            gpu,
            shader,
            &PipelineKey {
                shader: shader.into(),
                constants: vec![("SLICE", ARGMAX_SLICE)],
                layout: ARGMAX_LAYOUT,
            },
            buffers,
            When::Always,
            move |_| [n, 1, 1],
        )
        .map(|d| d.costs(move |_| Cost::reads(bytes)))
    };
    Ok([
        stage(
            "argmax",
            &[logits, partial, &pbuf],
            groups,
            f32s(n_vocab as u64),
        )?,
        stage(
            "argmax_combine",
            &[partial, tokens, &pbuf],
            1,
            f32s(2 * groups as u64),
        )?,
    ])
}
