//! A model's hyperparameters, read from GGUF metadata for each supported architecture.

use crate::gguf::Gguf;
use crate::kernels::moe::{Gating, Routing};
use crate::kernels::{Activation, RopeConfig};
use crate::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Qwen3,
    Gemma3,
    Qwen3Moe,
    Glm4Moe,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
            Arch::Qwen3Moe => "qwen3moe",
            Arch::Glm4Moe => "glm4moe",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    pub arch: Arch,
    pub n_vocab: u32,
    pub n_embd: u32,
    /// Layers of the main model (the MTP layers after them not counted).
    pub n_layer: u32,
    /// Next-token-prediction (MTP) layers after the main ones (`nextn_predict_layers`).
    pub n_nextn: u32,
    pub n_head: u32,
    pub n_kv_head: u32,
    pub head_dim: u32,
    pub n_ff: u32,
    /// Context length the model was trained for.
    pub ctx_train: u32,
    pub rms_eps: f32,
    /// RoPE of the global-attention layers.
    pub rope: RopeConfig,
    /// RoPE of the sliding-window layers (Gemma 3 uses another base there).
    pub rope_local: RopeConfig,
    /// Sliding window size and which layers use it.
    pub sliding_window: Option<SlidingWindow>,
    pub attn_scale: f32,
    /// Embeddings are multiplied by this (Gemma: sqrt(n_embd)).
    pub embed_scale: f32,
    pub activation: Activation,
    pub qk_norm: bool,
    pub qkv_bias: bool,
    /// Norms after attention and after the FFN, before the residual add (Gemma).
    pub post_norms: bool,
    pub attn_softcap: f32,
    /// Mixture-of-Experts FFNs (qwen3moe, glm4moe); `None` for dense models.
    pub moe: Option<MoeConfig>,
    /// FNV-1a of the token strings (`tokenizer.ggml.tokens`; 0 without them), so a draft model's
    /// vocabulary can be checked against the target's without their tokenizers.
    pub vocab_hash: u64,
    /// Bytes of tensor data the model uploads ([`Model::weight_bytes`](super::Model::weight_bytes)).
    pub weight_bytes: u64,
}

/// The MoE part of a model's hyperparameters (GGUF keys in tests/reference/README.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoeConfig {
    pub routing: Routing,
    /// Width of one routed expert's FFN (`expert_feed_forward_length`).
    pub n_ff_exp: u32,
    /// Shared experts beside the routed ones (`expert_shared_count`; glm4moe: 1).
    pub n_shared: u32,
    /// The first layers keep a dense FFN (`leading_dense_block_count`).
    pub n_dense_lead: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlidingWindow {
    pub size: u32,
    /// Every `pattern`-th layer (1-based) is global, the others slide; 0: all slide.
    pub pattern: u32,
}

/// FNV-1a over the token strings, each followed by a 0 byte.
fn vocab_hash(g: &Gguf) -> Result<u64> {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for t in g.opt_array("tokenizer.ggml.tokens")?.unwrap_or(&[]) {
        let bytes = match t {
            crate::gguf::Value::String(s) => s.as_bytes(),
            _ => &[],
        };
        for &b in bytes.iter().chain(&[0]) {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    Ok(h)
}

impl Config {
    pub fn from_gguf(g: &Gguf) -> Result<Config> {
        let arch_name = g.architecture()?;
        let arch = match arch_name {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "gemma3" => Arch::Gemma3,
            "qwen3moe" => Arch::Qwen3Moe,
            "glm4moe" => Arch::Glm4Moe,
            other => return Err(Error::UnsupportedArchitecture(other.to_string())),
        };
        let a = arch_name;
        let key = |k: &str| format!("{a}.{k}");
        let n_embd = g.req_u32(&key("embedding_length"))?;
        let n_head = g.req_u32(&key("attention.head_count"))?;
        let n_kv_head = g
            .opt_u32(&key("attention.head_count_kv"))?
            .unwrap_or(n_head);
        // Trailing next-token-prediction (MTP) blocks are not part of the main model.
        let n_blocks = g.req_u32(&key("block_count"))?;
        let n_nextn = g.opt_u32(&key("nextn_predict_layers"))?.unwrap_or(0);
        if n_nextn >= n_blocks {
            return Err(Error::Corrupt(format!(
                "{n_nextn} MTP layers of {n_blocks} blocks leave no main layer"
            )));
        }
        let n_layer = n_blocks - n_nextn;
        let n_ff = g.req_u32(&key("feed_forward_length"))?;
        let moe = match arch {
            Arch::Qwen3Moe | Arch::Glm4Moe => {
                let glm = arch == Arch::Glm4Moe;
                let n_expert = g.req_u32(&key("expert_count"))?;
                let n_group = g.opt_u32(&key("expert_group_count"))?.unwrap_or(1).max(1);
                let gating = match g.opt_u32(&key("expert_gating_func"))? {
                    Some(1) => Gating::Softmax,
                    Some(2) => Gating::Sigmoid,
                    None if glm => Gating::Sigmoid,
                    None => Gating::Softmax,
                    Some(other) => {
                        return Err(Error::InvalidArgument(format!(
                            "expert gating function {other} is not supported"
                        )))
                    }
                };
                let routing = Routing {
                    n_expert,
                    k: g.req_u32(&key("expert_used_count"))?,
                    gating,
                    // llama.cpp renormalises qwen3moe's weights whatever the key says (the
                    // converter does not write it); glm4moe has the key.
                    norm: g
                        .opt_bool(&key("expert_weights_norm"))?
                        .unwrap_or(arch == Arch::Qwen3Moe),
                    scale: match g.opt_f32(&key("expert_weights_scale"))? {
                        Some(s) if s != 0.0 => s,
                        _ => 1.0,
                    },
                    n_group,
                    topk_group: g
                        .opt_u32(&key("expert_group_used_count"))?
                        .unwrap_or(n_group),
                };
                routing.check()?;
                Some(MoeConfig {
                    routing,
                    n_ff_exp: g.req_u32(&key("expert_feed_forward_length"))?,
                    n_shared: g.opt_u32(&key("expert_shared_count"))?.unwrap_or(0),
                    n_dense_lead: g.opt_u32(&key("leading_dense_block_count"))?.unwrap_or(0),
                })
            }
            _ => None,
        };
        if n_head == 0 || n_kv_head == 0 || n_head % n_kv_head != 0 {
            return Err(Error::Corrupt(format!(
                "{n_head} attention heads cannot share {n_kv_head} KV heads"
            )));
        }
        let head_dim = match g.opt_u32(&key("attention.key_length"))? {
            Some(k) => k,
            None => n_embd / n_head,
        };
        if head_dim == 0 || head_dim > 256 || head_dim % 2 != 0 {
            return Err(Error::InvalidArgument(format!(
                "head size {head_dim} is not supported (even, at most 256)"
            )));
        }
        let n_vocab = match g.opt_u32(&key("vocab_size"))? {
            Some(v) => v,
            None => g
                .opt_array("tokenizer.ggml.tokens")?
                .map(|t| t.len() as u32)
                .ok_or_else(|| Error::MissingMetadata {
                    key: key("vocab_size"),
                    arch: a.to_string(),
                })?,
        };
        let ctx_train = g.opt_u32(&key("context_length"))?.unwrap_or(2048);
        let rms_eps = g.req_f32(&key("attention.layer_norm_rms_epsilon"))?;
        let n_rot = g.opt_u32(&key("rope.dimension_count"))?.unwrap_or(head_dim);
        let theta_base = g.opt_f32(&key("rope.freq_base"))?.unwrap_or(10000.0);
        let freq_scale = match g.opt_str(&key("rope.scaling.type"))? {
            None | Some("none") => 1.0,
            Some("linear") => 1.0 / g.opt_f32(&key("rope.scaling.factor"))?.unwrap_or(1.0),
            Some(other) => {
                return Err(Error::InvalidArgument(format!(
                    "RoPE scaling {other:?} is not supported yet"
                )))
            }
        };
        if n_rot > head_dim || n_rot % 2 != 0 {
            return Err(Error::Corrupt(format!(
                "RoPE dimension {n_rot} for heads of {head_dim}"
            )));
        }
        let rope = RopeConfig {
            n_rot,
            neox: arch != Arch::Llama,
            theta_base,
            freq_scale,
        };
        let gemma = arch == Arch::Gemma3;
        let sliding_window = match g.opt_u32(&key("attention.sliding_window"))? {
            Some(size) if gemma && size > 0 => Some(SlidingWindow { size, pattern: 6 }),
            _ => None,
        };
        Ok(Config {
            arch,
            n_vocab,
            n_embd,
            n_layer,
            n_nextn,
            n_head,
            n_kv_head,
            head_dim,
            n_ff,
            ctx_train,
            rms_eps,
            rope,
            // Gemma 3's sliding layers have their own base (llama.cpp's default: 10000), unscaled.
            rope_local: if gemma {
                RopeConfig {
                    theta_base: g.opt_f32(&key("rope.freq_base_swa"))?.unwrap_or(10000.0),
                    freq_scale: 1.0,
                    ..rope
                }
            } else {
                rope
            },
            sliding_window,
            attn_scale: 1.0 / (head_dim as f32).sqrt(),
            embed_scale: if gemma { (n_embd as f32).sqrt() } else { 1.0 },
            activation: if gemma {
                Activation::GeluTanh
            } else {
                Activation::Silu
            },
            qk_norm: matches!(arch, Arch::Qwen3 | Arch::Gemma3 | Arch::Qwen3Moe),
            qkv_bias: arch == Arch::Qwen2,
            post_norms: gemma,
            attn_softcap: g.opt_f32(&key("attn_logit_softcapping"))?.unwrap_or(0.0),
            moe,
            vocab_hash: vocab_hash(g)?,
            weight_bytes: super::Model::weight_bytes(g),
        })
    }

    /// Whether layer `il` has a routed-experts FFN.
    pub fn is_moe_layer(&self, il: u32) -> bool {
        self.moe.is_some_and(|m| il >= m.n_dense_lead)
    }

    /// Whether layer `il` attends through the sliding window.
    pub fn is_sliding(&self, il: u32) -> bool {
        match self.sliding_window {
            Some(w) if w.pattern == 0 => true,
            Some(w) => !(il + 1).is_multiple_of(w.pattern),
            None => false,
        }
    }
}
