//! Uploading a GGUF's tensors to GPU buffers in their quantized formats, split by rows where a
//! tensor exceeds the adapter's largest storage binding.

use crate::gguf::{ByteSource, Gguf, TensorInfo};
use crate::gpu::Gpu;
use crate::kernels::{GpuWeight, WeightChunk};
use crate::quant::{gpu_bytes, repack_for_gpu, GgmlType};
use crate::{Error, Result};

use super::config::Config;

pub struct Layer {
    pub attn_norm: wgpu::Buffer,
    pub wq: GpuWeight,
    pub wk: GpuWeight,
    pub wv: GpuWeight,
    pub bq: Option<wgpu::Buffer>,
    pub bk: Option<wgpu::Buffer>,
    pub bv: Option<wgpu::Buffer>,
    pub q_norm: Option<wgpu::Buffer>,
    pub k_norm: Option<wgpu::Buffer>,
    pub wo: GpuWeight,
    pub post_attn_norm: Option<wgpu::Buffer>,
    pub ffn_norm: wgpu::Buffer,
    pub gate: GpuWeight,
    pub up: GpuWeight,
    pub down: GpuWeight,
    pub post_ffn_norm: Option<wgpu::Buffer>,
}

pub struct Weights {
    pub token_embd: GpuWeight,
    pub layers: Vec<Layer>,
    pub output_norm: wgpu::Buffer,
    /// The output projection; `None` when it is tied to the token embeddings.
    pub output: Option<GpuWeight>,
}

/// Load progress, in bytes of tensor data.
#[derive(Clone, Copy, Debug)]
pub struct LoadProgress {
    pub done: u64,
    pub total: u64,
}

struct Loader<'a> {
    gpu: &'a Gpu,
    g: &'a Gguf,
    src: &'a dyn ByteSource,
    done: u64,
    total: u64,
    progress: &'a mut dyn FnMut(LoadProgress),
}

impl Loader<'_> {
    fn info(&self, name: &str) -> Result<&TensorInfo> {
        self.g
            .tensor(name)
            .ok_or_else(|| Error::MissingTensor(name.to_string()))
    }

    fn advance(&mut self, t: &TensorInfo) {
        self.done += t.n_bytes;
        (self.progress)(LoadProgress {
            done: self.done,
            total: self.total,
        });
    }

    /// A matrix of `rows` rows of `cols` elements (GGML dims [cols, rows]).
    fn matrix(&mut self, name: &str, cols: u32, rows: u32) -> Result<GpuWeight> {
        let t = self.info(name)?.clone();
        let dims: Vec<u64> = t.dims.iter().copied().chain([1, 1]).take(2).collect();
        if t.dims.len() > 2 || dims != [cols as u64, rows as u64] {
            return Err(Error::TensorShape {
                name: name.into(),
                found: t.dims.clone(),
                expected: vec![cols as u64, rows as u64],
            });
        }
        if !t.ty.gpu_supported() {
            return Err(Error::UnsupportedTensorType {
                name: name.into(),
                ty: t.ty.name(),
            });
        }
        if cols % 32 != 0 {
            return Err(Error::InvalidArgument(format!(
                "{name}: rows of {cols} elements are not a multiple of 32"
            )));
        }
        let data = self.g.tensor_data(self.src, &t)?;
        let row_bytes = t.n_bytes / rows as u64;
        let row_gpu = gpu_bytes(t.ty, cols as u64).unwrap_or(row_bytes);
        // Even row counts keep paired blocks inside one chunk; leave room for a pair's padding.
        let budget = self.gpu.max_binding().saturating_sub(1024);
        let max_rows = ((budget / row_gpu.max(1)) as u32) & !1;
        if max_rows == 0 {
            return Err(Error::Limits {
                what: format!("a storage binding for one row of {name}"),
                need: row_gpu,
                have: self.gpu.max_binding(),
            });
        }
        let mut chunks = Vec::new();
        let mut row0 = 0u32;
        while row0 < rows {
            let n = max_rows.min(rows - row0);
            let bytes =
                &data[(row0 as u64 * row_bytes) as usize..((row0 + n) as u64 * row_bytes) as usize];
            let packed = repack_for_gpu(t.ty, bytes);
            let buffer = self.gpu.storage_init(name, &packed)?;
            chunks.push(WeightChunk {
                buffer,
                row0,
                n_rows: n,
            });
            row0 += n;
        }
        self.advance(&t);
        Ok(GpuWeight {
            name: name.into(),
            ty: t.ty,
            n_rows: rows,
            n_cols: cols,
            chunks,
        })
    }

    /// A vector of `len` floats (norm weights, biases), converted to f32.
    fn vector(&mut self, name: &str, len: u32) -> Result<wgpu::Buffer> {
        let t = self.info(name)?.clone();
        if t.n_elements() != len as u64 {
            return Err(Error::TensorShape {
                name: name.into(),
                found: t.dims.clone(),
                expected: vec![len as u64],
            });
        }
        let data = self.g.tensor_data(self.src, &t)?;
        let floats: Vec<f32> = match t.ty {
            GgmlType::F32 => bytemuck::pod_collect_to_vec(&data),
            GgmlType::F16 => data
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            GgmlType::BF16 => data
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            other => {
                return Err(Error::UnsupportedTensorType {
                    name: name.into(),
                    ty: other.name(),
                })
            }
        };
        self.advance(&t);
        self.gpu.storage_init(name, bytemuck::cast_slice(&floats))
    }

    fn opt_vector(&mut self, name: &str, len: u32) -> Result<Option<wgpu::Buffer>> {
        if self.g.tensor(name).is_none() {
            return Ok(None);
        }
        self.vector(name, len).map(Some)
    }
}

impl Weights {
    pub fn load(
        gpu: &Gpu,
        g: &Gguf,
        src: &dyn ByteSource,
        c: &Config,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Weights> {
        let total = g.tensors.iter().map(|t| t.n_bytes).sum();
        let mut l = Loader {
            gpu,
            g,
            src,
            done: 0,
            total,
            progress,
        };
        let q_dim = c.n_head * c.head_dim;
        let kv_dim = c.n_kv_head * c.head_dim;
        let token_embd = l.matrix("token_embd.weight", c.n_embd, c.n_vocab)?;
        let mut layers = Vec::with_capacity(c.n_layer as usize);
        for i in 0..c.n_layer {
            let n = |s: &str| format!("blk.{i}.{s}");
            let bias = |l: &mut Loader, s: &str, len| -> Result<Option<wgpu::Buffer>> {
                if c.qkv_bias {
                    l.vector(&n(s), len).map(Some)
                } else {
                    l.opt_vector(&n(s), len)
                }
            };
            layers.push(Layer {
                attn_norm: l.vector(&n("attn_norm.weight"), c.n_embd)?,
                wq: l.matrix(&n("attn_q.weight"), c.n_embd, q_dim)?,
                wk: l.matrix(&n("attn_k.weight"), c.n_embd, kv_dim)?,
                wv: l.matrix(&n("attn_v.weight"), c.n_embd, kv_dim)?,
                bq: bias(&mut l, "attn_q.bias", q_dim)?,
                bk: bias(&mut l, "attn_k.bias", kv_dim)?,
                bv: bias(&mut l, "attn_v.bias", kv_dim)?,
                q_norm: if c.qk_norm {
                    Some(l.vector(&n("attn_q_norm.weight"), c.head_dim)?)
                } else {
                    None
                },
                k_norm: if c.qk_norm {
                    Some(l.vector(&n("attn_k_norm.weight"), c.head_dim)?)
                } else {
                    None
                },
                wo: l.matrix(&n("attn_output.weight"), q_dim, c.n_embd)?,
                post_attn_norm: if c.post_norms {
                    Some(l.vector(&n("post_attention_norm.weight"), c.n_embd)?)
                } else {
                    None
                },
                ffn_norm: l.vector(&n("ffn_norm.weight"), c.n_embd)?,
                gate: l.matrix(&n("ffn_gate.weight"), c.n_embd, c.n_ff)?,
                up: l.matrix(&n("ffn_up.weight"), c.n_embd, c.n_ff)?,
                down: l.matrix(&n("ffn_down.weight"), c.n_ff, c.n_embd)?,
                post_ffn_norm: if c.post_norms {
                    Some(l.vector(&n("post_ffw_norm.weight"), c.n_embd)?)
                } else {
                    None
                },
            });
        }
        let output_norm = l.vector("output_norm.weight", c.n_embd)?;
        let output = if g.tensor("output.weight").is_some() {
            Some(l.matrix("output.weight", c.n_embd, c.n_vocab)?)
        } else {
            None
        };
        Ok(Weights {
            token_embd,
            layers,
            output_norm,
            output,
        })
    }
}
