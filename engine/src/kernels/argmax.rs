//! Greedy sampling on the GPU: argmax over each output row of logits in two stages (argmax.wgsl,
//! argmax_combine.wgsl): one row for a decode step, the n + 1 rows of a speculative verification.

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
    n_groups: u32,
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
/// (f32 bits, id) pair per slice of `ARGMAX_SLICE` logits of each of `rows` rows; allocate it
/// once with the activations.
pub fn argmax_partial_len(n_vocab: u32, rows: u32) -> u64 {
    2 * n_vocab.div_ceil(ARGMAX_SLICE).max(1) as u64 * rows.max(1) as u64
}

/// `tokens[r] = argmax(logits[r, :])` for each of the pass's `n_out` rows (at most `max_rows`),
/// the lowest id on ties, in two dispatches: one workgroup per slice of a row into `partial`
/// ([`argmax_partial_len`] words), then one workgroup per row over its slices' winners. One
/// workgroup over a whole row could not pull memory fast enough (215 µs for 151936 logits on an
/// H200); the second dispatch costs one dependent launch (~3.6 µs there, MEASURE.md).
pub fn argmax(
    gpu: &Gpu,
    logits: &wgpu::Buffer,
    tokens: &wgpu::Buffer,
    partial: &wgpu::Buffer,
    n_vocab: u32,
    max_rows: u32,
) -> Result<[Dispatch; 2]> {
    let groups = n_vocab.div_ceil(ARGMAX_SLICE).max(1);
    if groups > MAX_GRID || max_rows > MAX_GRID {
        return Err(crate::Error::InvalidArgument(format!(
            "argmax handles vocabularies up to {} tokens and {MAX_GRID} rows, not {n_vocab} and {max_rows}",
            MAX_GRID as u64 * ARGMAX_SLICE as u64
        )));
    }
    let need = argmax_partial_len(n_vocab, max_rows) * 4;
    if partial.size() < need || tokens.size() < max_rows as u64 * 4 {
        return Err(crate::Error::InvalidArgument(format!(
            "argmax of {max_rows} rows of {n_vocab} logits needs a partial buffer of {need} bytes \
             and {max_rows} ids, not {} and {}",
            partial.size(),
            tokens.size() / 4
        )));
    }
    let pbuf = gpu.uniform(
        "argmax",
        &ArgmaxParams {
            n_vocab,
            n_groups: groups,
            _pad: [0; 2],
        },
    );
    // Bytes each stage reads a row: the logits row, then the slices' (value, index) winners.
    let stage =
        |shader: &str, buffers: &[&wgpu::Buffer], grid: fn(u32, u32) -> [u32; 3], bytes: f64| {
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
                move |s| grid(groups, s.n_out.min(max_rows)),
            )
            .map(|d| d.costs(move |s| Cost::reads(bytes * s.n_out as f64)))
        };
    Ok([
        stage(
            "argmax",
            &[logits, partial, &pbuf],
            |groups, rows| [groups, rows, 1],
            f32s(n_vocab as u64),
        )?,
        stage(
            "argmax_combine",
            &[partial, tokens, &pbuf],
            |_, rows| [rows, 1, 1],
            f32s(2 * groups as u64),
        )?,
    ])
}
