//! Embedding lookup (embed.wgsl): rows of a weight table of any weight type, dequantized.

use bytemuck::{Pod, Zeroable};

use super::dispatch::{key, qtype_suffix, Cost, Dispatch, When, IN2_OUT_LAYOUT};
#[cfg(test)]
use super::dispatch::{KernelBinds, StepUniform};
use super::mat::GpuWeight;
use crate::gpu::Gpu;
use crate::Result;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct EmbedParams {
    dim: u32,
    n_rows: u32,
    row0: u32,
    scale: f32,
}

#[cfg(test)]
pub(crate) const BINDS: &[KernelBinds] = &[KernelBinds {
    stem: "embed",
    layout: IN2_OUT_LAYOUT,
    unused: &[],
    uniforms: &[(3, size_of::<EmbedParams>()), (4, size_of::<StepUniform>())],
    constants: &[],
}];

/// `y[t, :] = scale * table[tokens[t], :]`.
pub fn embed(
    gpu: &Gpu,
    table: &GpuWeight,
    tokens: &wgpu::Buffer,
    y: &wgpu::Buffer,
    step: &wgpu::Buffer,
    scale: f32,
) -> Result<Vec<Dispatch>> {
    let mut out = Vec::new();
    for chunk in &table.chunks {
        let row_bytes = chunk.buffer.size() as f64 / chunk.n_rows as f64;
        let share = chunk.n_rows as f64 / table.n_rows as f64;
        let q = qtype_suffix(chunk.ty)?;
        let params = EmbedParams {
            dim: table.n_cols,
            n_rows: chunk.n_rows,
            row0: chunk.row0,
            scale,
        };
        let pbuf = gpu.uniform("embed", &params);
        out.push(
            Dispatch::one(
                gpu,
                &table.name,
                &key(format!("embed_{q}"), IN2_OUT_LAYOUT),
                &[&chunk.buffer, tokens, y, &pbuf, step],
                When::Always,
                |s| [s.n_tokens, 1, 1],
            )?
            .costs(move |s| {
                // A row of the table a token (a chunk's share of them), the ids.
                let n = s.n_tokens as f64;
                Cost::reads(row_bytes * n * share + 4.0 * n)
            }),
        );
    }
    Ok(out)
}
