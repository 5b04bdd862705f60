//! Uploading a GGUF's tensors to GPU buffers in their quantized formats, split by rows where a
//! tensor exceeds the adapter's largest storage binding.

use std::borrow::Cow;

use crate::gguf::{Gguf, TensorInfo};
use crate::gpu::Gpu;
use crate::kernels::moe::GpuExperts;
use crate::kernels::{GpuWeight, WeightChunk};
use crate::quant::{gpu_block_group, gpu_bytes, repack_for_gpu, GgmlType};
use crate::{Error, Result};

use super::config::{Arch, Config};
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
    pub ffn: Ffn,
    pub post_ffn_norm: Option<wgpu::Buffer>,
}

/// A dense FFN: gate and up stacked (one product gives `[gate | up]` per token), and down.
pub struct DenseFfn {
    pub gate_up: GpuWeight,
    pub down: GpuWeight,
    /// Width of the FFN (rows of gate).
    pub n_ff: u32,
}

pub enum Ffn {
    Dense(DenseFfn),
    Moe(Box<MoeFfn>),
}

/// A Mixture-of-Experts FFN.
pub struct MoeFfn {
    /// The router `ffn_gate_inp` `[n_expert, n_embd]`.
    pub router: GpuWeight,
    /// The expert selection bias `exp_probs_b` `[n_expert]` (glm4moe).
    pub bias: Option<wgpu::Buffer>,
    /// `ffn_gate_exps` and `ffn_up_exps`, per expert its gate rows then its up rows.
    pub gate_up: GpuExperts,
    /// `ffn_down_exps`.
    pub down: GpuExperts,
    /// The shared expert(s) (`ffn_*_shexp`), a dense FFN run beside the routed ones.
    pub shared: Option<DenseFfn>,
}

/// A next-token-prediction (MTP) layer, as llama.cpp's GGUFs store it (`blk.{n_layer}`): it
/// predicts the token after next from the target's last hidden state and the next token,
/// `eh_proj [enorm(embed(token)) | hnorm(h)]` through one transformer block, then its head.
pub struct MtpLayer {
    /// `nextn.eh_proj`: `[n_embd, 2 n_embd]`.
    pub eh_proj: GpuWeight,
    pub enorm: wgpu::Buffer,
    pub hnorm: wgpu::Buffer,
    /// `nextn.embed_tokens`; `None`: the model's `token_embd`.
    pub embed: Option<GpuWeight>,
    /// `nextn.shared_head_norm`; `None`: the model's `output_norm`.
    pub head_norm: Option<wgpu::Buffer>,
    /// `nextn.shared_head_head`; `None`: the model's output projection.
    pub head: Option<GpuWeight>,
    /// The block's own attention and FFN.
    pub block: Layer,
}

pub struct Weights {
    pub token_embd: GpuWeight,
    pub layers: Vec<Layer>,
    /// The first MTP layer, where the model has one (`nextn_predict_layers` and its tensors).
    pub mtp: Option<MtpLayer>,
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

struct Loader<'a, 's, S: TensorBytes<'s>> {
    gpu: &'a Gpu,
    g: &'a Gguf,
    src: &'a mut S,
    done: u64,
    total: u64,
    tensors_done: usize,
    progress: &'a mut dyn FnMut(LoadProgress),
    _bytes: std::marker::PhantomData<&'s [u8]>,
}

impl<'s, S: TensorBytes<'s>> Loader<'_, 's, S> {
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
    /// a new type, or a part after one that ends inside a group of blocks (a grouped type's
    /// GPU layout), starts a new one.
    async fn stacked(
        &mut self,
        label: &str,
        parts: &[(&str, u32)],
        cols: u32,
    ) -> Result<GpuWeight> {
        if !cols.is_multiple_of(32) {
            return Err(Error::InvalidArgument(format!(
                "{label}: rows of {cols} elements are not a multiple of 32"
            )));
        }
        let gpu: &Gpu = self.gpu;
        let budget = gpu.max_binding().saturating_sub(1024);
        // A chunk being filled: its type, first row, rows, bytes in GPU layout, and whether its
        // block count so far is a whole number of groups (grouped layouts concatenate only on
        // group boundaries).
        struct Open {
            ty: GgmlType,
            row0: u32,
            rows: u32,
            /// The pieces in GPU layout, concatenated at the flush (a chunk of one piece, a
            /// large tensor's usual case, is uploaded without a copy).
            pieces: Vec<Vec<u8>>,
            len: u64,
            whole: bool,
        }
        let flush = |open: Option<Open>, chunks: &mut Vec<WeightChunk>| -> Result<()> {
            if let Some(o) = open {
                let buffer = match o.pieces.as_slice() {
                    [one] => gpu.storage_init(label, one)?,
                    many => gpu.storage_init(label, &many.concat())?,
                };
                chunks.push(WeightChunk {
                    buffer,
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
            let mut data = self.src.tensor_bytes(self.g, &t).await?;
            let row_bytes = t.n_bytes / rows as u64;
            let row_gpu = gpu_bytes(t.ty, cols as u64).unwrap_or(row_bytes).max(1);
            // Pieces of a multiple of the type's group of blocks in rows keep every group inside
            // one piece.
            let group = gpu_block_group(t.ty) as u32;
            let max_rows = (budget / row_gpu) as u32 / group * group;
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
                let repacked = match repack_for_gpu(t.ty, &data[range.clone()]) {
                    Cow::Owned(v) => Some(v),
                    Cow::Borrowed(_) => None,
                };
                // The tensor's own bytes where they need no repacking and go whole (no copy of
                // a streamed tensor).
                let packed = match repacked {
                    Some(v) => v,
                    None if range.len() == data.len() => std::mem::take(&mut data).into_owned(),
                    None => data[range].to_vec(),
                };
                let fits = open.as_ref().is_some_and(|o| {
                    o.ty == t.ty && o.whole && o.len + packed.len() as u64 <= budget
                });
                if !fits {
                    flush(open.take(), &mut chunks)?;
                    open = Some(Open {
                        ty: t.ty,
                        row0: row_base + r,
                        rows: 0,
                        pieces: Vec::new(),
                        len: 0,
                        whole: true,
                    });
                }
                let o = open.as_mut().expect("a chunk is open");
                o.len += packed.len() as u64;
                o.pieces.push(packed);
                o.rows += n;
                o.whole = (blocks_per_row * n as u64).is_multiple_of(gpu_block_group(t.ty));
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

    /// The dense FFN `ffn_{gate,up,down}<suffix>.weight` of layer `i`, its width read from the
    /// gate tensor.
    async fn dense_ffn(&mut self, i: u32, suffix: &str, n_embd: u32) -> Result<DenseFfn> {
        let n = |s: &str| format!("blk.{i}.ffn_{s}{suffix}.weight");
        let n_ff = match self.info(&n("gate"))?.dims.as_slice() {
            [_, rows] => *rows as u32,
            other => {
                return Err(Error::TensorShape {
                    name: n("gate"),
                    found: other.to_vec(),
                    expected: vec![n_embd as u64, 0],
                })
            }
        };
        Ok(DenseFfn {
            gate_up: self
                .stacked(
                    &format!("blk.{i}.ffn_gate_up{suffix}"),
                    &[(&n("gate"), n_ff), (&n("up"), n_ff)],
                    n_embd,
                )
                .await?,
            down: self.matrix(&n("down"), n_ff, n_embd).await?,
            n_ff,
        })
    }

    /// Stacked expert tensors (each GGML dims `[cols, rows, n_expert]`), split by whole experts
    /// into chunks that fit a storage binding.
    async fn experts(
        &mut self,
        label: &str,
        names: &[&str],
        n_expert: u32,
        rows: u32,
        cols: u32,
    ) -> Result<GpuExperts> {
        let mut datas = Vec::new();
        let mut ty = None;
        for &name in names {
            let t = self.info(name)?.clone();
            if t.dims != [cols as u64, rows as u64, n_expert as u64] {
                return Err(Error::TensorShape {
                    name: name.into(),
                    found: t.dims.clone(),
                    expected: vec![cols as u64, rows as u64, n_expert as u64],
                });
            }
            if !t.ty.gpu_supported() || ty.is_some_and(|x| x != t.ty) {
                return Err(Error::UnsupportedTensorType {
                    name: name.into(),
                    ty: t.ty.name(),
                });
            }
            ty = Some(t.ty);
            datas.push((self.src.tensor_bytes(self.g, &t).await?, t));
        }
        let slices: Vec<&[u8]> = datas.iter().map(|(d, _)| &d[..]).collect();
        let budget = self.gpu.max_binding().saturating_sub(1024);
        let ex = GpuExperts::upload(
            self.gpu,
            label,
            ty.expect("at least one tensor"),
            &slices,
            n_expert,
            rows,
            cols,
            budget,
        )?;
        for (_, t) in &datas {
            self.advance(t);
        }
        Ok(ex)
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

    /// Block `i`'s attention and FFN (a main layer, or an MTP layer's block).
    async fn layer(&mut self, i: u32, c: &Config) -> Result<Layer> {
        let g = self.g;
        let q_dim = c.n_head * c.head_dim;
        let kv_dim = c.n_kv_head * c.head_dim;
        let n = |s: &str| format!("blk.{i}.{s}");
        let (q, k, v) = (n("attn_q.weight"), n("attn_k.weight"), n("attn_v.weight"));
        let (bq, bk, bv) = (n("attn_q.bias"), n("attn_k.bias"), n("attn_v.bias"));
        let has_bias = c.qkv_bias || g.tensor(&bq).is_some();
        Ok(Layer {
            attn_norm: self.vector(&n("attn_norm.weight"), c.n_embd).await?,
            wqkv: self
                .stacked(
                    &n("attn_qkv"),
                    &[(&q, q_dim), (&k, kv_dim), (&v, kv_dim)],
                    c.n_embd,
                )
                .await?,
            bqkv: if has_bias {
                Some(
                    self.vectors(&[(&bq, q_dim), (&bk, kv_dim), (&bv, kv_dim)])
                        .await?,
                )
            } else {
                None
            },
            q_norm: if c.qk_norm || g.tensor(&n("attn_q_norm.weight")).is_some() {
                Some(self.vector(&n("attn_q_norm.weight"), c.head_dim).await?)
            } else {
                None
            },
            k_norm: if c.qk_norm || g.tensor(&n("attn_k_norm.weight")).is_some() {
                Some(self.vector(&n("attn_k_norm.weight"), c.head_dim).await?)
            } else {
                None
            },
            wo: self
                .matrix(&n("attn_output.weight"), q_dim, c.n_embd)
                .await?,
            post_attn_norm: if c.post_norms {
                Some(
                    self.vector(&n("post_attention_norm.weight"), c.n_embd)
                        .await?,
                )
            } else {
                None
            },
            // glm4moe names the FFN input norm post_attention_norm.
            ffn_norm: self
                .vector(
                    &n(if c.arch == Arch::Glm4Moe {
                        "post_attention_norm.weight"
                    } else {
                        "ffn_norm.weight"
                    }),
                    c.n_embd,
                )
                .await?,
            ffn: match c.moe {
                Some(m) if c.is_moe_layer(i) => {
                    let ne = m.routing.n_expert;
                    Ffn::Moe(Box::new(MoeFfn {
                        router: self.matrix(&n("ffn_gate_inp.weight"), c.n_embd, ne).await?,
                        bias: match g.tensor(&n("exp_probs_b.bias")) {
                            Some(_) => Some(self.vector(&n("exp_probs_b.bias"), ne).await?),
                            None => None,
                        },
                        gate_up: self
                            .experts(
                                &n("ffn_gate_up_exps"),
                                &[&n("ffn_gate_exps.weight"), &n("ffn_up_exps.weight")],
                                ne,
                                m.n_ff_exp,
                                c.n_embd,
                            )
                            .await?,
                        down: self
                            .experts(
                                &n("ffn_down_exps"),
                                &[&n("ffn_down_exps.weight")],
                                ne,
                                c.n_embd,
                                m.n_ff_exp,
                            )
                            .await?,
                        shared: if m.n_shared > 0 {
                            Some(self.dense_ffn(i, "_shexp", c.n_embd).await?)
                        } else {
                            None
                        },
                    }))
                }
                _ => Ffn::Dense(self.dense_ffn(i, "", c.n_embd).await?),
            },
            post_ffn_norm: if c.post_norms {
                Some(self.vector(&n("post_ffw_norm.weight"), c.n_embd).await?)
            } else {
                None
            },
        })
    }

    /// The first next-token-prediction block (`blk.{n_layer}`): its block and the `nextn.*`
    /// tensors; the embeddings and the head fall back to the model's where it has none.
    async fn mtp(&mut self, c: &Config) -> Result<MtpLayer> {
        let i = c.n_layer;
        let n = |s: &str| format!("blk.{i}.nextn.{s}.weight");
        let opt = |s: &str| self.g.tensor(&n(s)).is_some();
        let (has_embed, has_head, has_head_norm) = (
            opt("embed_tokens"),
            opt("shared_head_head"),
            opt("shared_head_norm"),
        );
        Ok(MtpLayer {
            eh_proj: self.matrix(&n("eh_proj"), 2 * c.n_embd, c.n_embd).await?,
            enorm: self.vector(&n("enorm"), c.n_embd).await?,
            hnorm: self.vector(&n("hnorm"), c.n_embd).await?,
            embed: match has_embed {
                true => Some(self.matrix(&n("embed_tokens"), c.n_embd, c.n_vocab).await?),
                false => None,
            },
            head_norm: match has_head_norm {
                true => Some(self.vector(&n("shared_head_norm"), c.n_embd).await?),
                false => None,
            },
            head: match has_head {
                true => Some(
                    self.matrix(&n("shared_head_head"), c.n_embd, c.n_vocab)
                        .await?,
                ),
                false => None,
            },
            block: self.layer(i, c).await?,
        })
    }
}

impl Weights {
    pub async fn load<'s, S: TensorBytes<'s>>(
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
            _bytes: std::marker::PhantomData,
        };
        let token_embd = l.matrix("token_embd.weight", c.n_embd, c.n_vocab).await?;
        let mut layers = Vec::with_capacity(c.n_layer as usize);
        for i in 0..c.n_layer {
            layers.push(l.layer(i, c).await?);
        }
        // A GGUF may keep `nextn_predict_layers` yet leave the MTP tensors out (converted
        // without them), as llama.cpp allows.
        let mtp = match g.tensor(&format!("blk.{}.nextn.eh_proj.weight", c.n_layer)) {
            Some(_) if c.n_nextn > 0 => Some(l.mtp(c).await?),
            _ => None,
        };
        let output_norm = l.vector("output_norm.weight", c.n_embd).await?;
        let output = if g.tensor("output.weight").is_some() {
            Some(l.matrix("output.weight", c.n_embd, c.n_vocab).await?)
        } else {
            None
        };
        Ok(Weights {
            token_embd,
            layers,
            mtp,
            output_norm,
            output,
        })
    }
}
