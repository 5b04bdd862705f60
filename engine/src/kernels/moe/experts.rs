//! The routed experts' weights on the GPU: stacked expert tensors split by whole experts into
//! chunks that each fit one storage binding.

use crate::gpu::Gpu;
use crate::quant::{gpu_bytes, repack_for_gpu, GgmlType};
use crate::{Error, Result};

/// A stacked expert tensor on the GPU (`[n_expert, rows, n_cols]`), split by whole experts into
/// chunks that each fit one storage binding (browsers: 128 MiB). Kernels take a chunk's first
/// expert and count, and skip routes to experts outside it.
pub struct GpuExperts {
    pub name: String,
    pub n_expert: u32,
    /// Rows per expert (gate/up: 2 * n_ff, gate rows then up rows; down: n_embd).
    pub rows: u32,
    pub n_cols: u32,
    pub chunks: Vec<ExpertChunk>,
}

pub struct ExpertChunk {
    pub buffer: wgpu::Buffer,
    pub ty: GgmlType,
    pub e0: u32,
    pub n_exp: u32,
}

impl GpuExperts {
    /// Uploads expert tensors given in GGUF layout, each `[n_expert, rows_each, n_cols]` of type
    /// `ty`: with several tensors (gate and up), expert e's rows of each are placed one after the
    /// other. Chunks hold whole experts and at most `budget` bytes.
    #[allow(clippy::too_many_arguments)]
    pub fn upload(
        gpu: &Gpu,
        name: &str,
        ty: GgmlType,
        tensors: &[&[u8]],
        n_expert: u32,
        rows_each: u32,
        n_cols: u32,
        budget: u64,
    ) -> Result<GpuExperts> {
        let row_bytes = ty.bytes_for(n_cols as u64).ok_or_else(|| {
            Error::InvalidArgument(format!("{name}: rows of {n_cols} elements of {ty}"))
        })? as usize;
        let per_tensor = row_bytes * rows_each as usize;
        for t in tensors {
            if t.len() != per_tensor * n_expert as usize {
                return Err(Error::InvalidArgument(format!(
                    "{name}: {} bytes for {n_expert} experts of {rows_each} x {n_cols} {ty}",
                    t.len()
                )));
            }
        }
        // The most experts whose GPU copy (padded to a whole group of blocks) fits the budget.
        let elements = (rows_each as usize * tensors.len()) as u64 * n_cols as u64;
        let gpu_size = |n: u64| gpu_bytes(ty, n * elements).unwrap_or(u64::MAX);
        let mut per_chunk = (budget / gpu_size(1).max(1)).min(n_expert as u64);
        while per_chunk < n_expert as u64 && gpu_size(per_chunk + 1) <= budget {
            per_chunk += 1;
        }
        let per_chunk = per_chunk as u32;
        if per_chunk == 0 {
            return Err(Error::Limits {
                what: format!("a storage binding for one expert of {name}"),
                need: gpu_size(1),
                have: budget,
            });
        }
        let mut chunks = Vec::new();
        let mut e0 = 0;
        while e0 < n_expert {
            let n = per_chunk.min(n_expert - e0);
            let mut bytes = Vec::with_capacity(per_tensor * tensors.len() * n as usize);
            for e in e0..e0 + n {
                for t in tensors {
                    bytes.extend_from_slice(
                        &t[e as usize * per_tensor..(e as usize + 1) * per_tensor],
                    );
                }
            }
            chunks.push(ExpertChunk {
                buffer: gpu.storage_init(name, &repack_for_gpu(ty, &bytes))?,
                ty,
                e0,
                n_exp: n,
            });
            e0 += n;
        }
        Ok(GpuExperts {
            name: name.into(),
            n_expert,
            rows: rows_each * tensors.len() as u32,
            n_cols,
            chunks,
        })
    }
}
