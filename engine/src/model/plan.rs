//! The memory plan of a session, made once (llama2.c's `RunState`): activation buffers sized for
//! one pass of `ubatch` tokens, the KV cache for `ctx` positions (of one sequence, or of every
//! session of a [`SessionSet`](super::SessionSet) in one buffer per layer), and the checks that
//! each fits a storage binding of the adapter, so a model too large for its settings fails here with what to
//! lower rather than in a kernel. [`SessionOptions::check`] runs the same checks from the
//! model's metadata alone, before its weights are uploaded.

use crate::gpu::Gpu;
use crate::kernels::{self, moe, Heads, KvType, Row, StepUniform};
use crate::{Error, Result};

use super::{Config, Ffn, Model};

#[derive(Clone, Copy, Debug)]
pub struct SessionOptions {
    /// KV-cache capacity in positions.
    pub ctx: u32,
    /// Most tokens one forward pass takes (prompt chunks are cut to this).
    pub ubatch: u32,
    /// Most rows of logits one pass returns (at most `ubatch`): a prompt's pass returns one, a
    /// verification one a token, perplexity half its chunk. The logits buffer holds this many
    /// rows of the vocabulary (19 MB at 32 rows of Qwen3's 152k tokens).
    pub outputs: u32,
    /// What the KV cache holds (f16 by default: half the memory and half the bytes a decode
    /// step reads from it at long contexts).
    pub kv: KvType,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            ctx: 4096,
            ubatch: 512,
            outputs: 32,
            kv: KvType::F16,
        }
    }
}

impl SessionOptions {
    /// Whether sessions with these options fit `gpu`'s storage bindings, from the model's
    /// config alone: callers run it before uploading the weights, so that a context or batch
    /// too large for the adapter is refused before gigabytes are uploaded. The widest dense FFN
    /// is taken to be `feed_forward_length`; [`Session::new`](super::Session::new) checks again
    /// with the uploaded widths. Where the adapter tells its memory ([`Gpu::memory`]: Vulkan),
    /// the weights and the KV caches together must fit it; elsewhere a device that runs out
    /// while uploading fails the upload with an out-of-memory error.
    pub fn check(&self, gpu: &Gpu, config: &Config) -> Result<()> {
        self.check_set(gpu, config, 1)
    }

    /// [`SessionOptions::check`] for a [`SessionSet`](super::SessionSet) of `n_seq` sessions,
    /// whose KV caches share one buffer per layer.
    pub fn check_set(&self, gpu: &Gpu, config: &Config, n_seq: u32) -> Result<()> {
        check_sizes(gpu.max_binding(), config, config.n_ff as u64, *self)?;
        check_kv(gpu.max_binding(), config, *self, n_seq)?;
        check_memory(gpu.memory, config, *self, n_seq)
    }
}

/// The weights and the KV caches of `n_seq` sequences (every layer's, the MTP layers' too) must
/// fit `memory`, the device's memory where the adapter tells it, so that a model too large for
/// the device is refused before anything is uploaded.
pub(super) fn check_memory(
    memory: Option<u64>,
    c: &Config,
    opts: SessionOptions,
    n_seq: u32,
) -> Result<()> {
    let Some(memory) = memory else {
        return Ok(());
    };
    let layers = (c.n_layer + c.n_nextn) as u64;
    let kv = kv_layer_bytes(c, opts)
        .saturating_mul(2 * layers)
        .saturating_mul(n_seq as u64);
    let need = c.weight_bytes.saturating_add(kv);
    if need > memory {
        let lower = what_to_lower(n_seq);
        return Err(Error::Limits {
            what: format!(
                "device memory for the weights ({} MiB) and the KV cache of {} positions for \
                 {n_seq} sequence(s) ({} MiB; {lower})",
                c.weight_bytes >> 20,
                opts.ctx,
                kv >> 20
            ),
            need,
            have: memory,
        });
    }
    Ok(())
}

/// The size checks of a plan's activations, `n_ff` the widest dense FFN: a batch's activations
/// and the logits must each fit a storage binding of `max_binding` bytes. Returns the most rows
/// of logits one pass can return.
fn check_sizes(max_binding: u64, c: &Config, n_ff: u64, opts: SessionOptions) -> Result<u32> {
    if opts.ctx == 0 || opts.ubatch == 0 || opts.outputs == 0 {
        return Err(Error::InvalidArgument(
            "context, batch and outputs must be positive".into(),
        ));
    }
    let b = opts.ubatch as u64;
    let f = 4u64;
    let max_out = ((max_binding / (c.n_vocab as u64 * f)).min(b) as u32)
        .min(opts.outputs)
        .max(1);
    for (what, size) in [
        ("the activations of one batch", b * 2 * n_ff.max(1) * f),
        ("the logits", max_out as u64 * c.n_vocab as u64 * f),
    ] {
        if size > max_binding {
            return Err(Error::Limits {
                what: format!("a storage binding for {what} (lower the batch size)"),
                need: size,
                have: max_binding,
            });
        }
    }
    Ok(max_out)
}

/// What a KV cache for `n_seq` sequences too large for the device asks of the user.
fn what_to_lower(n_seq: u32) -> &'static str {
    if n_seq > 1 {
        "lower the context or the parallel slots"
    } else {
        "lower the context"
    }
}

/// One layer's KV cache for `n_seq` sequences must fit a storage binding: attention reaches
/// every sequence through one bind group.
fn check_kv(max_binding: u64, c: &Config, opts: SessionOptions, n_seq: u32) -> Result<()> {
    let kv_bytes = kv_layer_bytes(c, opts) * n_seq as u64;
    if kv_bytes > max_binding {
        let lower = what_to_lower(n_seq);
        return Err(Error::Limits {
            what: format!(
                "a storage binding for one layer's KV cache of {} positions for {n_seq} \
                 sequence(s) ({lower})",
                opts.ctx
            ),
            need: kv_bytes,
            have: max_binding,
        });
    }
    Ok(())
}

/// Bytes of one layer's keys (or values) for `opts.ctx` positions of one sequence
/// ([`kv_positions`]).
fn kv_layer_bytes(c: &Config, opts: SessionOptions) -> u64 {
    (c.n_kv_head * c.head_dim) as u64 * kv_positions(opts.ctx) as u64 * opts.kv.bytes()
}

/// Positions the KV cache holds for a context of `ctx`: whole tiles of [`kernels::ATTN_TILE`]
/// keys, which the matrix-unit attention reads whole (a pass stops at `ctx` all the same).
pub(super) fn kv_positions(ctx: u32) -> u32 {
    ctx.checked_next_multiple_of(kernels::ATTN_TILE)
        .unwrap_or(ctx)
}

/// The KV caches of `n_seq` sequences, one buffer per layer for keys and one for values, each
/// `[n_seq, n_kv_head, ctx, head_dim]`: sequence i is session i's.
pub(super) fn kv_caches(
    gpu: &Gpu,
    c: &Config,
    opts: SessionOptions,
    n_seq: u32,
) -> Result<Vec<LayerKv>> {
    check_kv(gpu.max_binding(), c, opts, n_seq)?;
    let bytes = kv_layer_bytes(c, opts) * n_seq as u64;
    (0..c.n_layer)
        .map(|i| {
            Ok(LayerKv {
                k: gpu.storage(&format!("k_cache.{i}"), bytes)?,
                v: gpu.storage(&format!("v_cache.{i}"), bytes)?,
            })
        })
        .collect()
}

/// Activation buffers, sized for one pass of `ubatch` tokens (cloned handles: the MTP layer's
/// passes share them).
#[derive(Clone)]
pub(super) struct Activations {
    pub tokens: wgpu::Buffer,         // [ubatch] u32
    pub x: wgpu::Buffer,              // [ubatch, n_embd] the residual stream
    pub xn: wgpu::Buffer, // [ubatch, n_embd] normalised input of a block (batched passes)
    pub x_q8: wgpu::Buffer, // a small pass's input to one matrix, quantized (kernels::quantize_q8)
    pub tmp: wgpu::Buffer, // [ubatch, n_embd] block output before its post-norm (Gemma)
    pub qkv: wgpu::Buffer, // [ubatch, (n_head + 2 n_kv_head) * head_dim]
    pub attn: wgpu::Buffer, // [ubatch, n_head * head_dim]
    pub attn_partial: wgpu::Buffer, // kernels::attention_partial_len words: split attention's partial results, then their counts
    pub gate_up: wgpu::Buffer,      // [ubatch, 2 n_ff] (batched passes)
    pub hidden: wgpu::Buffer,       // [ubatch, n_ff]
    pub out_norm: wgpu::Buffer,     // [max_out, n_embd]
    pub logits: wgpu::Buffer,       // [max_out, n_vocab]
    pub argmax_partial: wgpu::Buffer, // [argmax_partial_len(max_out)] words: greedy sampling's slice winners
    pub targets: wgpu::Buffer,        // [max_out] u32: a verification's argmax of each output row
    pub step: wgpu::Buffer,           // StepUniform
    pub rows: wgpu::Buffer,           // [ubatch] Row: the row table of a batched step (SessionSet)
    pub dummy: wgpu::Buffer,          // bound where a kernel's optional input is absent
    pub moe: Option<moe::MoeBuffers>, // router logits, routes, token lists, expert activations
}

/// One layer's KV cache: keys and values, `[n_seq, n_kv_head, ctx, head_dim]` each (f16 or f32,
/// `SessionOptions::kv`); cloned handles where sessions share it.
#[derive(Clone)]
pub(super) struct LayerKv {
    pub k: wgpu::Buffer,
    pub v: wgpu::Buffer,
}

/// What the MTP layer has besides the session's activations (which its passes share: they run
/// after the target's in the same queue).
pub(super) struct MtpBuffers {
    pub tokens: wgpu::Buffer, // [ubatch] u32: the token of each pair
    pub step: wgpu::Buffer,   // StepUniform of the MTP pass
    pub h: wgpu::Buffer,      // [ubatch, n_embd] the hidden state of each pair; the head's norm
    pub e: wgpu::Buffer,      // [ubatch, n_embd] the tokens' embeddings
    pub eh: wgpu::Buffer,     // [ubatch, 2 n_embd] [enorm(e) | hnorm(h)]
    pub kv: LayerKv,
}

/// Everything a session allocates up front besides its KV cache (its own, or a share of a
/// session set's: [`kv_caches`]).
pub(super) struct Plan {
    pub act: Activations,
    /// Where the model has an MTP layer.
    pub mtp: Option<MtpBuffers>,
    /// Most rows of logits one pass can return.
    pub max_out: u32,
}

impl Plan {
    pub fn new(gpu: &Gpu, model: &Model, opts: SessionOptions) -> Result<Plan> {
        let c = &model.config;
        let (act, max_out) = Activations::new(gpu, model, opts)?;
        let b = opts.ubatch as u64;
        let n = b * c.n_embd as u64;
        let s = |label: &str, n: u64| gpu.storage(label, n * 4);
        let kv_bytes = kv_layer_bytes(c, opts);
        let mtp = match &model.weights.mtp {
            Some(_) => Some(MtpBuffers {
                tokens: s("mtp_tokens", b)?,
                step: gpu.uniform("mtp_step", &StepUniform::default()),
                h: s("mtp_h", n)?,
                e: s("mtp_e", n)?,
                eh: s("mtp_eh", 2 * n)?,
                kv: LayerKv {
                    k: gpu.storage("mtp_k_cache", kv_bytes)?,
                    v: gpu.storage("mtp_v_cache", kv_bytes)?,
                },
            }),
            None => None,
        };
        Ok(Plan { act, mtp, max_out })
    }
}

impl Activations {
    /// The activations of passes of up to `opts.ubatch` tokens; also returns the most rows of
    /// logits one pass can return.
    pub fn new(gpu: &Gpu, model: &Model, opts: SessionOptions) -> Result<(Activations, u32)> {
        let c = &model.config;
        let b = opts.ubatch as u64;
        let f = 4u64;
        let q_dim = (c.n_head * c.head_dim) as u64;
        let kv_dim = (c.n_kv_head * c.head_dim) as u64;
        // Widest dense FFN (dense layers, shared experts).
        let n_ff = model
            .weights
            .layers
            .iter()
            .map(|l| match &l.ffn {
                Ffn::Dense(d) => d.n_ff,
                Ffn::Moe(m) => m.shared.as_ref().map_or(0, |d| d.n_ff),
            })
            .max()
            .unwrap_or(c.n_ff)
            .max(1) as u64;
        let max_out = check_sizes(gpu.max_binding(), c, n_ff, opts)?;
        let s = |label: &str, n: u64| gpu.storage(label, n * f);
        let heads = Heads {
            n_head: c.n_head,
            n_kv_head: c.n_kv_head,
            head_dim: c.head_dim,
            ctx: kv_positions(opts.ctx),
        };
        let act = Activations {
            tokens: s("tokens", b)?,
            x: s("x", b * c.n_embd as u64)?,
            xn: s("xn", b * c.n_embd as u64)?,
            // Every matrix input: n_embd, q_dim, n_ff, the MTP layer's [e | h]; quantized for
            // the small passes, as f16 for the long ones on the matrix units.
            x_q8: gpu.storage("x_q8", {
                let cols = (2 * c.n_embd).max(q_dim as u32).max(n_ff as u32);
                let q8 = kernels::q8_bytes(opts.ubatch.min(kernels::mat::MATVEC_BATCH), cols);
                let f16 = if gpu.features.coop {
                    b * cols as u64 * 2
                } else {
                    0
                };
                q8.max(f16)
            })?,
            tmp: s("tmp", b * c.n_embd as u64)?,
            qkv: s("qkv", b * (q_dim + 2 * kv_dim))?,
            attn: s("attn", b * q_dim)?,
            attn_partial: s("attn_partial", kernels::attention_partial_len(&heads))?,
            gate_up: s("gate_up", b * 2 * n_ff)?,
            hidden: s("hidden", b * n_ff)?,
            out_norm: s("out_norm", max_out as u64 * c.n_embd as u64)?,
            logits: s("logits", max_out as u64 * c.n_vocab as u64)?,
            argmax_partial: s(
                "argmax_partial",
                kernels::argmax_partial_len(c.n_vocab, max_out),
            )?,
            targets: s("targets", max_out as u64)?,
            step: gpu.uniform("step", &StepUniform::default()),
            rows: gpu.storage("rows", b * size_of::<Row>() as u64)?,
            dummy: s("dummy", 4)?,
            moe: match &c.moe {
                Some(m) => Some(moe::MoeBuffers::new(
                    gpu,
                    &m.routing,
                    c.n_embd,
                    m.n_ff_exp,
                    opts.ubatch,
                    c.n_layer,
                )?),
                None => None,
            },
        };
        Ok((act, max_out))
    }
}

/// Each layer's slot of router shares where its router folds into the attention output's decode
/// product ([`kernels::matvec_route`]: MoE layers routed in moe_gate_up's prologue, without a
/// post-attention norm, whose router fits), numbered in order; `None` elsewhere, and everywhere
/// when fewer than two layers fold (a folded layer clears the previous folded layer's slot, so
/// one alone would clear its own). The session's MoE buffers hold a slot a layer.
pub(super) fn share_slots(gpu: &Gpu, model: &Model) -> Vec<Option<u32>> {
    let routes_in_gate_up = model
        .config
        .moe
        .as_ref()
        .is_some_and(|m| m.routing.routes_in_gate_up());
    let folds = model.weights.layers.iter().map(|l| match &l.ffn {
        Ffn::Moe(m) => {
            routes_in_gate_up
                && l.post_attn_norm.is_none()
                && kernels::route_share_fits(gpu, &l.wo, &m.router, None)
        }
        Ffn::Dense(_) => false,
    });
    let mut n = 0;
    let slots: Vec<Option<u32>> = folds
        .map(|f| {
            f.then(|| {
                n += 1;
                n - 1
            })
        })
        .collect();
    if n < 2 {
        return vec![None; slots.len()];
    }
    slots
}
