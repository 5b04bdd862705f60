//! Uploading a GGUF's tensors to GPU buffers in their quantized formats, split by rows where a
//! tensor exceeds the adapter's largest storage binding.

use crate::gguf::{Gguf, TensorInfo};
use crate::gpu::Gpu;
use crate::kernels::{GpuWeight, WeightChunk};
use crate::quant::{gpu_bytes, repack_for_gpu, GgmlType};
use crate::{Error, Result};

use super::config::Config;
use super::source::TensorBytes;

pub struct Layer {
    pub attn_norm: wgpu::Buffer,
    /// Q, K and V stacked: one product gives `[q | k | v]` per token.
    pub wqkv: GpuWeight,
    /// The Q, K, V biases stacked (Qwen2).
    pub bqkv: Option<wgpu::Buffer>,
    pub q_norm: Option<wgpu::Buffer>,
    pub k_norm: Option<wgpu::Buffer>,
    pub wo: GpuWeight,
    pub post_attn_norm: Option<wgpu::Buffer>,
    pub ffn_norm: wgpu::Buffer,
    /// Gate and up stacked: one product gives `[gate | up]` per token.
    pub gate_up: GpuWeight,
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

/// Load progress: bytes of tensor data uploaded, and tensors.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadProgress {
    pub done: u64,
    pub total: u64,
    pub tensors_done: usize,
    pub tensors_total: usize,
    /// File bytes received so far, for sources that stream (a download); `None` otherwise.
    pub received: Option<u64>,
}

struct Loader<'a, S: TensorBytes> {
    gpu: &'a Gpu,
    g: &'a Gguf,
    src: &'a mut S,
    done: u64,
    total: u64,
    tensors_done: usize,
    progress: &'a mut dyn FnMut(LoadProgress),
}

impl<S: TensorBytes> Loader<'_, S> {
    fn info(&self, name: &str) -> Result<&TensorInfo> {
        self.g
            .tensor(name)
            .ok_or_else(|| Error::MissingTensor(name.to_string()))
    }

    fn advance(&mut self, t: &TensorInfo) {
        self.done += t.n_bytes;
        self.tensors_done += 1;
        (self.progress)(LoadProgress {
            done: self.done,
            total: self.total,
            tensors_done: self.tensors_done,
            tensors_total: self.g.tensors.len(),
            received: self.src.bytes_received(),
        });
    }

    /// A matrix of `rows` rows of `cols` elements (GGML dims [cols, rows]).
    async fn matrix(&mut self, name: &str, cols: u32, rows: u32) -> Result<GpuWeight> {
        self.stacked(name, &[(name, rows)], cols).await
    }

    /// The matrices `parts` (name, rows), each of rows of `cols` elements, stacked by rows into
    /// one weight. Consecutive row ranges of one type share a GPU buffer up to the binding limit;
    /// a new type, or a part with an odd number of blocks after a paired type, starts a new one.
    async fn stacked(
        &mut self,
        label: &str,
        parts: &[(&str, u32)],
        cols: u32,
    ) -> Result<GpuWeight> {
        if cols % 32 != 0 {
            return Err(Error::InvalidArgument(format!(
                "{label}: rows of {cols} elements are not a multiple of 32"
            )));
        }
        let gpu: &Gpu = self.gpu;
        let budget = gpu.max_binding().saturating_sub(1024);
        // A chunk being filled: its type, first row, rows, bytes in GPU layout, and whether its
        // block count so far is even (paired layouts concatenate only on pair boundaries).
        struct Open {
            ty: GgmlType,
            row0: u32,
            rows: u32,
            bytes: Vec<u8>,
            even: bool,
        }
        let flush = |open: Option<Open>, chunks: &mut Vec<WeightChunk>| -> Result<()> {
            if let Some(o) = open {
                chunks.push(WeightChunk {
                    buffer: gpu.storage_init(label, &o.bytes)?,
                    ty: o.ty,
                    row0: o.row0,
                    n_rows: o.rows,
                });
            }
            Ok(())
        };
        let mut chunks = Vec::new();
        let mut open: Option<Open> = None;
        let mut row_base = 0u32;
        for &(name, rows) in parts {
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
            let data = self.src.tensor_bytes(self.g, &t).await?;
            let row_bytes = t.n_bytes / rows as u64;
            let row_gpu = gpu_bytes(t.ty, cols as u64).unwrap_or(row_bytes).max(1);
            // Even row counts per piece keep paired blocks inside one piece.
            let max_rows = ((budget / row_gpu) as u32) & !1;
            if max_rows == 0 {
                return Err(Error::Limits {
                    what: format!("a storage binding for one row of {name}"),
                    need: row_gpu,
                    have: gpu.max_binding(),
                });
            }
            let blocks_per_row = cols as u64 / t.ty.block_geometry().map_or(1, |g| g.0);
            let mut r = 0u32;
            while r < rows {
                let n = max_rows.min(rows - r);
                let range = (r as u64 * row_bytes) as usize..((r + n) as u64 * row_bytes) as usize;
                let packed = repack_for_gpu(t.ty, &data[range]);
                let fits = open.as_ref().is_some_and(|o| {
                    o.ty == t.ty && o.even && (o.bytes.len() + packed.len()) as u64 <= budget
                });
                if !fits {
                    flush(open.take(), &mut chunks)?;
                    open = Some(Open {
                        ty: t.ty,
                        row0: row_base + r,
                        rows: 0,
                        bytes: Vec::new(),
                        even: true,
                    });
                }
                let o = open.as_mut().expect("a chunk is open");
                o.bytes.extend_from_slice(&packed);
                o.rows += n;
                o.even = (blocks_per_row * n as u64) % 2 == 0;
                r += n;
            }
            row_base += rows;
            self.advance(&t);
        }
        flush(open, &mut chunks)?;
        Ok(GpuWeight {
            name: label.into(),
            n_rows: row_base,
            n_cols: cols,
            chunks,
        })
    }

    /// A vector of `len` floats (norm weights, biases), converted to f32.
    async fn vector(&mut self, name: &str, len: u32) -> Result<wgpu::Buffer> {
        self.vectors(&[(name, len)]).await
    }

    /// Vectors (name, length) concatenated into one buffer of f32.
    async fn vectors(&mut self, parts: &[(&str, u32)]) -> Result<wgpu::Buffer> {
        let mut all = Vec::new();
        for &(name, len) in parts {
            all.extend(self.floats(name, len).await?);
        }
        self.gpu
            .storage_init(parts[0].0, bytemuck::cast_slice(&all))
    }

    async fn floats(&mut self, name: &str, len: u32) -> Result<Vec<f32>> {
        let t = self.info(name)?.clone();
        if t.n_elements() != len as u64 {
            return Err(Error::TensorShape {
                name: name.into(),
                found: t.dims.clone(),
                expected: vec![len as u64],
            });
        }
        let data = self.src.tensor_bytes(self.g, &t).await?;
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
        Ok(floats)
    }
}

impl Weights {
    pub async fn load<S: TensorBytes>(
        gpu: &Gpu,
        g: &Gguf,
        src: &mut S,
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
            tensors_done: 0,
            progress,
        };
        let q_dim = c.n_head * c.head_dim;
        let kv_dim = c.n_kv_head * c.head_dim;
        let token_embd = l.matrix("token_embd.weight", c.n_embd, c.n_vocab).await?;
        let mut layers = Vec::with_capacity(c.n_layer as usize);
        for i in 0..c.n_layer {
            let n = |s: &str| format!("blk.{i}.{s}");
            let (q, k, v) = (n("attn_q.weight"), n("attn_k.weight"), n("attn_v.weight"));
            let (bq, bk, bv) = (n("attn_q.bias"), n("attn_k.bias"), n("attn_v.bias"));
            let has_bias = c.qkv_bias || g.tensor(&bq).is_some();
            layers.push(Layer {
                attn_norm: l.vector(&n("attn_norm.weight"), c.n_embd).await?,
                wqkv: l
                    .stacked(
                        &n("attn_qkv"),
                        &[(&q, q_dim), (&k, kv_dim), (&v, kv_dim)],
                        c.n_embd,
                    )
                    .await?,
                bqkv: if has_bias {
                    Some(
                        l.vectors(&[(&bq, q_dim), (&bk, kv_dim), (&bv, kv_dim)])
                            .await?,
                    )
                } else {
                    None
                },
                q_norm: if c.qk_norm {
                    Some(l.vector(&n("attn_q_norm.weight"), c.head_dim).await?)
                } else {
                    None
                },
                k_norm: if c.qk_norm {
                    Some(l.vector(&n("attn_k_norm.weight"), c.head_dim).await?)
                } else {
                    None
                },
                wo: l.matrix(&n("attn_output.weight"), q_dim, c.n_embd).await?,
                post_attn_norm: if c.post_norms {
                    Some(l.vector(&n("post_attention_norm.weight"), c.n_embd).await?)
                } else {
                    None
                },
                ffn_norm: l.vector(&n("ffn_norm.weight"), c.n_embd).await?,
                gate_up: l
                    .stacked(
                        &n("ffn_gate_up"),
                        &[
                            (&n("ffn_gate.weight"), c.n_ff),
                            (&n("ffn_up.weight"), c.n_ff),
                        ],
                        c.n_embd,
                    )
                    .await?,
                down: l.matrix(&n("ffn_down.weight"), c.n_ff, c.n_embd).await?,
                post_ffn_norm: if c.post_norms {
                    Some(l.vector(&n("post_ffw_norm.weight"), c.n_embd).await?)
                } else {
                    None
                },
            });
        }
        let output_norm = l.vector("output_norm.weight", c.n_embd).await?;
        let output = if g.tensor("output.weight").is_some() {
            Some(l.matrix("output.weight", c.n_embd, c.n_vocab).await?)
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
