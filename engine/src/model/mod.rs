//! Models: hyperparameters, weights on the GPU, and sessions that run the forward pass.
//!
//! A [`Session`] plans its memory once (activations for a batch of up to `ubatch` tokens, the KV
//! cache for `ctx` positions) and records the forward pass once as a list of dispatches. Each pass
//! (a prompt chunk in prefill, one token in decode, the n+1 tokens of a speculative verification)
//! replays that list with a new [`StepInfo`] in one compute pass and one submit.

mod config;
mod perplexity;
mod source;
mod weights;

use std::sync::Arc;

pub use config::MoeConfig;
pub use config::{Arch, Config, SlidingWindow};
pub use perplexity::{perplexity, Perplexity};
pub use source::{read_header, ChunkReader, FileOrderStream, SliceTensors, TensorBytes};
pub use weights::{DenseFfn, Ffn, LoadProgress, MoeFfn, Weights};

use crate::gguf::{ByteSource, Gguf};
use crate::gpu::Gpu;
use crate::kernels::{
    self, moe, AttnOpts, DecodeRope, Dispatch, Heads, KvBuffers, MatOpts, NormOpts, Rows, StepInfo,
    StepUniform, When,
};
use crate::sampling::Sampler;
use crate::{Error, Result};

pub struct Model {
    pub gpu: Arc<Gpu>,
    pub config: Config,
    pub weights: Weights,
}

impl Model {
    /// Uploads the model's weights from a random-access source (a memory-mapped file, a buffer);
    /// `progress` hears of every tensor.
    pub async fn load(
        gpu: Arc<Gpu>,
        g: &Gguf,
        src: &dyn ByteSource,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Model> {
        Model::load_from(gpu, g, &mut SliceTensors(src), progress).await
    }

    /// Uploads the model's weights from any [`TensorBytes`] source: a file, a `Blob`, or a download
    /// arriving in file order ([`FileOrderStream`]), each tensor uploaded as its bytes arrive.
    pub async fn load_from<'s, S: TensorBytes<'s>>(
        gpu: Arc<Gpu>,
        g: &Gguf,
        src: &mut S,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Model> {
        let config = Model::check(&gpu, g)?;
        let weights = gpu
            .scoped_async(
                "uploading the weights",
                Weights::load(&gpu, g, src, &config, progress),
            )
            .await?;
        Ok(Model {
            gpu,
            config,
            weights,
        })
    }
}

impl Model {
    /// Whether `gpu` can run the model described by the header `g`, before any tensor data is
    /// read (in a browser: before gigabytes are downloaded). Checks the architecture, every
    /// tensor's type, and that one row of every matrix fits a storage binding; returns the config.
    pub fn check(gpu: &Gpu, g: &Gguf) -> Result<Config> {
        let config = Config::from_gguf(g)?;
        for t in &g.tensors {
            if !t.ty.gpu_supported() {
                return Err(Error::UnsupportedTensorType {
                    name: t.name.clone(),
                    ty: t.ty.name(),
                });
            }
            if t.dims.len() >= 2 {
                let row = crate::quant::gpu_bytes(t.ty, t.dims[0]).unwrap_or(t.n_bytes);
                if row > gpu.max_binding() {
                    return Err(Error::Limits {
                        what: format!("a storage binding for one row of {}", t.name),
                        need: row,
                        have: gpu.max_binding(),
                    });
                }
            }
        }
        Ok(config)
    }

    /// Bytes of tensor data the model uploads.
    pub fn weight_bytes(g: &Gguf) -> u64 {
        g.tensors.iter().map(|t| t.n_bytes).sum()
    }
}

#[derive(Clone, Copy, Debug)]
pub struct SessionOptions {
    /// KV-cache capacity in positions.
    pub ctx: u32,
    /// Most tokens one forward pass takes (prompt chunks are cut to this).
    pub ubatch: u32,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            ctx: 4096,
            ubatch: 256,
        }
    }
}

/// Activation buffers, sized for one pass of `ubatch` tokens.
struct Activations {
    tokens: wgpu::Buffer,         // [ubatch] u32
    x: wgpu::Buffer,              // [ubatch, n_embd] the residual stream
    xn: wgpu::Buffer,             // [ubatch, n_embd] normalised input of a block (batched passes)
    tmp: wgpu::Buffer,            // [ubatch, n_embd] block output before its post-norm (Gemma)
    qkv: wgpu::Buffer,            // [ubatch, (n_head + 2 n_kv_head) * head_dim]
    attn: wgpu::Buffer,           // [ubatch, n_head * head_dim]
    attn_partial: wgpu::Buffer, // [n_head, MAX_ATTN_SPLITS, head_dim + 4] split attention's partial results
    gate_up: wgpu::Buffer,      // [ubatch, 2 n_ff] (batched passes)
    hidden: wgpu::Buffer,       // [ubatch, n_ff]
    out_norm: wgpu::Buffer,     // [max_out, n_embd]
    logits: wgpu::Buffer,       // [max_out, n_vocab]
    argmax_partial: wgpu::Buffer, // [argmax_partial_len] words: greedy sampling's slice winners
    step: wgpu::Buffer,         // StepUniform
    dummy: wgpu::Buffer,        // bound where a kernel's optional input is absent
    moe: Option<moe::MoeBuffers>, // router logits, routes, token lists, expert activations
}

pub struct Session {
    pub model: Arc<Model>,
    pub opts: SessionOptions,
    /// Most rows of logits one pass can return.
    pub max_out: u32,
    act: Activations,
    _kv: Vec<(wgpu::Buffer, wgpu::Buffer)>,
    forward: Vec<Dispatch>,
    greedy: [Dispatch; 2],
    sample: kernels::SampleKernels,
    /// Two readback buffers for sampled ids, used in turn: a pass run ahead copies its id into
    /// one while the host reads the other.
    staging: [wgpu::Buffer; 2],
    /// The staging buffer the next sampling pass copies into.
    next_staging: usize,
    /// Positions in the KV cache, counting a pass run ahead.
    pos: u32,
    /// The ids at positions 0..pos (for prompt-prefix reuse; the id a pass run ahead fed joins
    /// when the host reads it), and the id sampled last, which the next decode step feeds from
    /// the GPU.
    history: Vec<u32>,
    sampled: Option<u32>,
    /// The readback of a decode pass submitted ahead of its `decode` call (see there).
    ahead: Option<Readback>,
    /// Whether `decode` runs one pass ahead. On by default, except on a CPU adapter (lavapipe,
    /// SwiftShader): there a pass takes seconds, so the host's share that running ahead hides is
    /// noise, while the pass undone at the end of every reply costs a whole step.
    pub run_ahead: bool,
}

/// Where and when a sampling pass copies its id for the host.
struct Readback {
    staging: usize,
    submission: wgpu::SubmissionIndex,
}

impl Session {
    pub async fn new(model: Arc<Model>, opts: SessionOptions) -> Result<Session> {
        let gpu = model.gpu.clone();
        gpu.scoped("planning the session", || Session::plan(model, opts))
            .await
    }

    fn plan(model: Arc<Model>, opts: SessionOptions) -> Result<Session> {
        let gpu = &*model.gpu;
        let c = &model.config;
        if opts.ctx == 0 || opts.ubatch == 0 {
            return Err(Error::InvalidArgument(
                "context and batch must be positive".into(),
            ));
        }
        let b = opts.ubatch as u64;
        let f = 4u64;
        let q_dim = (c.n_head * c.head_dim) as u64;
        let kv_dim = (c.n_kv_head * c.head_dim) as u64;
        let max_binding = gpu.max_binding();
        let max_out = ((max_binding / (c.n_vocab as u64 * f)).min(b) as u32).max(1);
        let s = |label: &str, n: u64| gpu.storage(label, n * f);
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
        let act = Activations {
            tokens: s("tokens", b)?,
            x: s("x", b * c.n_embd as u64)?,
            xn: s("xn", b * c.n_embd as u64)?,
            tmp: s("tmp", b * c.n_embd as u64)?,
            qkv: s("qkv", b * (q_dim + 2 * kv_dim))?,
            attn: s("attn", b * q_dim)?,
            attn_partial: s(
                "attn_partial",
                kernels::attention_partial_len(&Heads {
                    n_head: c.n_head,
                    n_kv_head: c.n_kv_head,
                    head_dim: c.head_dim,
                    ctx: opts.ctx,
                }),
            )?,
            gate_up: s("gate_up", b * 2 * n_ff)?,
            hidden: s("hidden", b * n_ff)?,
            out_norm: s("out_norm", max_out as u64 * c.n_embd as u64)?,
            logits: s("logits", max_out as u64 * c.n_vocab as u64)?,
            argmax_partial: s("argmax_partial", kernels::argmax_partial_len(c.n_vocab))?,
            step: gpu.uniform("step", &StepUniform::default()),
            dummy: s("dummy", 4)?,
            moe: match &c.moe {
                Some(m) => Some(moe::MoeBuffers::new(
                    gpu,
                    &m.routing,
                    c.n_embd,
                    m.n_ff_exp,
                    opts.ubatch,
                )?),
                None => None,
            },
        };
        for (what, size) in [
            ("the activations of one batch", b * 2 * n_ff * f),
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
        let kv_bytes = kv_dim * opts.ctx as u64 * f;
        if kv_bytes > max_binding {
            return Err(Error::Limits {
                what: format!(
                    "a storage binding for one layer's KV cache of {} positions (lower the context)",
                    opts.ctx
                ),
                need: kv_bytes,
                have: max_binding,
            });
        }
        let mut kv = Vec::new();
        for i in 0..c.n_layer {
            kv.push((
                gpu.storage(&format!("k_cache.{i}"), kv_bytes)?,
                gpu.storage(&format!("v_cache.{i}"), kv_bytes)?,
            ));
        }
        let forward = record_forward(gpu, &model, &act, &kv, opts.ctx)?;
        let greedy = kernels::argmax(
            gpu,
            &act.logits,
            &act.tokens,
            &act.argmax_partial,
            c.n_vocab,
            0,
        )?;
        let sample = kernels::sample(gpu, &act.logits, &act.tokens, c.n_vocab, 0)?;
        let staging = [0, 1].map(|_| {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("token readback"),
                size: 4,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        Ok(Session {
            model: model.clone(),
            opts,
            max_out,
            act,
            _kv: kv,
            forward,
            greedy,
            sample,
            staging,
            next_staging: 0,
            pos: 0,
            history: Vec::new(),
            sampled: None,
            ahead: None,
            run_ahead: gpu.info.device_type != wgpu::DeviceType::Cpu,
        })
    }

    /// Tokens in the KV cache (not counting a decode pass run ahead).
    pub fn pos(&self) -> u32 {
        self.pos - self.ahead.is_some() as u32
    }

    /// Forgets every position from `pos` on (a new conversation, or rejected draft tokens).
    pub fn truncate(&mut self, pos: u32) {
        self.discard_ahead();
        self.pos = self.pos.min(pos);
        self.history.truncate(self.pos as usize);
        self.sampled = None;
    }

    /// The token ids in the KV cache, in order.
    pub fn history(&self) -> &[u32] {
        &self.history[..self.pos() as usize]
    }

    /// Undoes a decode pass run ahead: its position leaves the cache's count (the slot is
    /// overwritten later) and the token it fed leaves the history, and the id it sampled over
    /// the GPU's input token is replaced by the one the host holds, so a later decode feeds that.
    fn discard_ahead(&mut self) {
        if self.ahead.take().is_some() {
            self.pos -= 1;
            self.history.pop();
            if let Some(id) = self.sampled {
                self.model
                    .gpu
                    .queue
                    .write_buffer(&self.act.tokens, 0, bytemuck::bytes_of(&id));
            }
        }
    }

    /// Keeps the longest cached prefix of `prompt` (leaving at least one token to feed) and
    /// returns the part of `prompt` still to feed: a chat turn re-reads only what is new.
    pub fn reuse_prefix<'p>(&mut self, prompt: &'p [u32]) -> &'p [u32] {
        let common = self
            .history
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count()
            .min(prompt.len().saturating_sub(1));
        self.truncate(common as u32);
        &prompt[common..]
    }

    /// Dispatches one token's decode records (a tracked number: launches are the budget).
    pub fn dispatches_per_token(&self) -> usize {
        let s = StepInfo {
            n_tokens: 1,
            pos: 0,
            n_out: 1,
        };
        self.forward
            .iter()
            .chain(&self.greedy)
            .filter(|d| (d.grid)(&s).is_some())
            .count()
    }

    fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
        let n_vocab = self.model.config.n_vocab;
        if let Some(&bad) = tokens.iter().find(|&&t| t >= n_vocab) {
            return Err(Error::InvalidArgument(format!(
                "token id {bad} is outside the vocabulary of {n_vocab}"
            )));
        }
        let need = self.pos as usize + tokens.len();
        if need > self.opts.ctx as usize {
            return Err(Error::ContextOverflow {
                tokens: need,
                context: self.opts.ctx as usize,
            });
        }
        Ok(())
    }

    /// Records and submits one forward pass over `tokens` (at most `ubatch`; `None`: the token
    /// sampled last, already on the GPU, which the caller enters in the history), keeping logits
    /// for the last `n_out`; with a sampler, also samples from the last row into the token buffer
    /// and copies the id for readback.
    fn pass(
        &mut self,
        tokens: Option<&[u32]>,
        n_tokens: u32,
        n_out: u32,
        mut sampler: Option<&mut Sampler>,
    ) -> Option<Readback> {
        let gpu = &self.model.gpu;
        if let Some(t) = tokens {
            gpu.queue
                .write_buffer(&self.act.tokens, 0, bytemuck::cast_slice(t));
            self.history.extend_from_slice(t);
            self.sampled = None;
        }
        let s = StepInfo {
            n_tokens,
            pos: self.pos,
            n_out,
        };
        gpu.queue
            .write_buffer(&self.act.step, 0, bytemuck::bytes_of(&StepUniform::from(s)));
        if let Some(sm) = sampler.as_deref_mut() {
            if !sm.params.is_greedy() {
                let u = sm.next_uniform();
                self.sample.prepare(gpu, &sm.params, &self.history, u);
            }
        }
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            for d in &self.forward {
                d.record(&mut pass, &s);
            }
            match &sampler {
                Some(sm) if sm.params.is_greedy() => {
                    for d in &self.greedy {
                        d.record(&mut pass, &s);
                    }
                }
                Some(_) => {
                    for d in &self.sample.dispatches {
                        d.record(&mut pass, &s);
                    }
                }
                None => {}
            }
        }
        let staging = self.next_staging;
        if sampler.is_some() {
            encoder.copy_buffer_to_buffer(&self.act.tokens, 0, &self.staging[staging], 0, 4);
            self.next_staging ^= 1;
        }
        let submission = gpu.submit(encoder.finish());
        self.pos += n_tokens;
        sampler.map(|_| Readback {
            staging,
            submission,
        })
    }

    /// Feeds `tokens` (any number, cut into batches) and returns the logits of the last `n_out`
    /// of them, row by row (`n_out` at most `max_out` and at most the length of the last batch).
    pub async fn eval(&mut self, tokens: &[u32], n_out: u32) -> Result<Vec<f32>> {
        self.discard_ahead();
        self.check_tokens(tokens)?;
        if tokens.is_empty() || n_out == 0 || n_out > self.max_out {
            return Err(Error::InvalidArgument(format!(
                "eval needs tokens and 1..={} output rows",
                self.max_out
            )));
        }
        let chunks: Vec<&[u32]> = tokens.chunks(self.opts.ubatch as usize).collect();
        let last = chunks.len() - 1;
        if n_out as usize > chunks[last].len() {
            return Err(Error::InvalidArgument(format!(
                "{n_out} output rows from a last batch of {} tokens",
                chunks[last].len()
            )));
        }
        for (i, chunk) in chunks.iter().enumerate() {
            let out = if i == last { n_out } else { 0 };
            self.pass(Some(chunk), chunk.len() as u32, out, None);
        }
        let n = n_out as usize * self.model.config.n_vocab as usize;
        let gpu = self.model.gpu.clone();
        gpu.read_f32(&self.act.logits, 0, n).await
    }

    /// Feeds the prompt and returns the sampled next token.
    pub async fn prefill(&mut self, tokens: &[u32], sampler: &mut Sampler) -> Result<u32> {
        self.discard_ahead();
        self.check_tokens(tokens)?;
        if tokens.is_empty() {
            return Err(Error::InvalidArgument("the prompt is empty".into()));
        }
        let chunks: Vec<&[u32]> = tokens.chunks(self.opts.ubatch as usize).collect();
        let last = chunks.len() - 1;
        let mut readback = None;
        for (i, chunk) in chunks.iter().enumerate() {
            let sampling = (i == last).then_some(&mut *sampler);
            let n_out = sampling.is_some() as u32;
            readback = self.pass(Some(chunk), chunk.len() as u32, n_out, sampling);
        }
        self.read_token(readback.expect("the last chunk samples"))
            .await
    }

    /// Decodes one token: the input is the token the last pass sampled (still on the GPU).
    ///
    /// It also runs ahead: once the pass that samples this token is submitted, the next pass
    /// (which feeds this token from the GPU) is submitted too, before the host reads the token
    /// back, so the GPU works through the readback and the recording of the next pass instead
    /// of waiting for them (a fifth of a decode step on a fast GPU). The next `decode` takes
    /// that pass's token; anything else that moves the session undoes it (`discard_ahead`).
    /// Not where the position would pass the context, nor for a sampler whose next token
    /// depends on this one from the host (`SamplerParams::reads_history`), nor without
    /// `run_ahead`; a discarded pass has drawn its random number, which the next token's draw
    /// then follows.
    pub async fn decode(&mut self, sampler: &mut Sampler) -> Result<u32> {
        self.decode_step(sampler, true).await
    }

    /// [`Session::decode`] for the last token the caller wants: no pass runs ahead.
    pub async fn decode_last(&mut self, sampler: &mut Sampler) -> Result<u32> {
        self.decode_step(sampler, false).await
    }

    async fn decode_step(&mut self, sampler: &mut Sampler, more: bool) -> Result<u32> {
        let readback = match self.ahead.take() {
            Some(r) => r,
            None => {
                self.check_tokens(&[0])?;
                let Some(fed) = self.sampled else {
                    return Err(Error::InvalidArgument(
                        "decode needs a sampled token first".into(),
                    ));
                };
                self.history.push(fed);
                self.pass(None, 1, 1, Some(&mut *sampler))
                    .expect("a sampling pass")
            }
        };
        if more && self.run_ahead && self.pos < self.opts.ctx && !sampler.params.reads_history() {
            self.ahead = self.pass(None, 1, 1, Some(&mut *sampler));
        }
        let id = match self.read_token(readback).await {
            Ok(id) => id,
            Err(e) => {
                // The pass ahead fed a token the host never learnt: leave it out of the count.
                if self.ahead.take().is_some() {
                    self.pos -= 1;
                }
                return Err(e);
            }
        };
        if self.ahead.is_some() {
            self.history.push(id);
        }
        Ok(id)
    }

    /// Times each dispatch of one pass of `n_tokens` at the current position with GPU timestamps
    /// (one compute pass per dispatch, so the total exceeds a normal pass's time by the pass
    /// overheads). Returns (label, nanoseconds) in dispatch order; the cache is left unchanged.
    pub async fn profile(&mut self, n_tokens: u32) -> Result<Vec<(String, f64)>> {
        self.discard_ahead();
        let gpu = self.model.gpu.clone();
        if !gpu.features.timestamps {
            return Err(Error::Gpu("this adapter has no timestamp queries".into()));
        }
        self.check_tokens(&vec![0; n_tokens as usize])?;
        let s = StepInfo {
            n_tokens,
            pos: self.pos,
            n_out: 1,
        };
        let active: Vec<&Dispatch> = self
            .forward
            .iter()
            .chain(&self.greedy)
            .filter(|d| (d.grid)(&s).is_some())
            .collect();
        let count = 2 * active.len() as u32;
        let queries = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("profile"),
            ty: wgpu::QueryType::Timestamp,
            count,
        });
        let resolved = gpu.storage("profile", count as u64 * 8)?;
        let resolved_dst = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("profile"),
            size: count as u64 * 8,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        gpu.queue
            .write_buffer(&self.act.step, 0, bytemuck::bytes_of(&StepUniform::from(s)));
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        for (i, d) in active.iter().enumerate() {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &queries,
                    beginning_of_pass_write_index: Some(2 * i as u32),
                    end_of_pass_write_index: Some(2 * i as u32 + 1),
                }),
            });
            d.record(&mut pass, &s);
        }
        encoder.resolve_query_set(&queries, 0..count, &resolved_dst, 0);
        encoder.copy_buffer_to_buffer(&resolved_dst, 0, &resolved, 0, count as u64 * 8);
        gpu.submit(encoder.finish());
        // Its argmax overwrote the GPU's input token for the next decode step.
        if let Some(id) = self.sampled {
            gpu.queue
                .write_buffer(&self.act.tokens, 0, bytemuck::bytes_of(&id));
        }
        let ticks: Vec<u64> =
            bytemuck::pod_collect_to_vec(&gpu.read(&resolved, 0, count as u64 * 8).await?);
        let period = gpu.queue.get_timestamp_period() as f64;
        Ok(active
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let ns = ticks[2 * i + 1].saturating_sub(ticks[2 * i]) as f64 * period;
                (d.label.clone(), ns)
            })
            .collect())
    }

    async fn read_token(&mut self, r: Readback) -> Result<u32> {
        let bytes = self
            .model
            .gpu
            .map_staging(&self.staging[r.staging], 4, r.submission)
            .await?;
        let id = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        self.sampled = Some(id);
        Ok(id)
    }
}

/// The forward pass as a list of dispatches over the session's buffers. Decode passes take the
/// fused kernels (the RMSNorm in the matvec prologue, gate/up/activation in one matvec); batched
/// passes take the norm, the tiled matmuls and the activation one by one.
fn record_forward(
    gpu: &Gpu,
    model: &Model,
    a: &Activations,
    kv: &[(wgpu::Buffer, wgpu::Buffer)],
    ctx: u32,
) -> Result<Vec<Dispatch>> {
    let c = &model.config;
    let w = &model.weights;
    let mut d = Vec::new();
    d.extend(kernels::embed(
        gpu,
        &w.token_embd,
        &a.tokens,
        &a.x,
        &a.step,
        c.embed_scale,
    )?);
    let norm = |x: &wgpu::Buffer, wt: &wgpu::Buffer, y: &wgpu::Buffer, accumulate: bool, when| {
        kernels::rmsnorm(
            gpu,
            x,
            wt,
            y,
            &a.step,
            c.n_embd,
            c.rms_eps,
            NormOpts {
                accumulate,
                rows: Rows::Tokens,
                when,
                subgroups: true,
            },
        )
    };
    // `y (+)= W RMSNorm(x)`: fused for decode, norm then matmul for batches.
    let normed_mat = |d: &mut Vec<Dispatch>,
                      wt: &kernels::GpuWeight,
                      norm_w: &wgpu::Buffer,
                      y: &wgpu::Buffer,
                      bias: Option<&wgpu::Buffer>|
     -> Result<()> {
        d.extend(kernels::mat(
            gpu,
            wt,
            &a.x,
            y,
            &a.step,
            &a.dummy,
            &MatOpts {
                bias,
                norm: Some((norm_w, c.rms_eps)),
                when: When::Decode,
                ..Default::default()
            },
        )?);
        d.push(norm(&a.x, norm_w, &a.xn, false, When::Batch)?);
        d.extend(kernels::mat(
            gpu,
            wt,
            &a.xn,
            y,
            &a.step,
            &a.dummy,
            &MatOpts {
                bias,
                when: When::Batch,
                ..Default::default()
            },
        )?);
        Ok(())
    };
    let heads = Heads {
        n_head: c.n_head,
        n_kv_head: c.n_kv_head,
        head_dim: c.head_dim,
        ctx,
    };
    for (il, (l, (k_cache, v_cache))) in w.layers.iter().zip(kv).enumerate() {
        let sliding = c.is_sliding(il as u32);
        normed_mat(&mut d, &l.wqkv, &l.attn_norm, &a.qkv, l.bqkv.as_ref())?;
        let qk_norm = match (&l.q_norm, &l.k_norm) {
            (Some(qn), Some(kn)) => Some((qn, kn, c.rms_eps)),
            _ => None,
        };
        let rope = if sliding { c.rope_local } else { c.rope };
        // Decode passes do this in attention's prologue.
        d.push(
            kernels::rope_store(
                gpu,
                &KvBuffers {
                    qkv: &a.qkv,
                    k_cache,
                    v_cache,
                },
                &a.step,
                heads,
                rope,
                qk_norm,
                &a.dummy,
            )?
            .only(When::Batch),
        );
        d.extend(kernels::attention(
            gpu,
            &a.qkv,
            k_cache,
            v_cache,
            &a.attn,
            &a.attn_partial,
            &a.step,
            heads,
            AttnOpts {
                scale: c.attn_scale,
                window: match c.sliding_window {
                    Some(sw) if sliding => sw.size,
                    _ => 0,
                },
                softcap: c.attn_softcap,
                decode_rope: Some(DecodeRope { rope, qk_norm }),
                subgroups: true,
            },
        )?);
        // Output projection and residual add: fused, or through the post-norm (Gemma).
        let residual =
            |d: &mut Vec<Dispatch>, wt, post: &Option<wgpu::Buffer>, input| -> Result<()> {
                match post {
                    None => d.extend(kernels::mat(
                        gpu,
                        wt,
                        input,
                        &a.x,
                        &a.step,
                        &a.dummy,
                        &MatOpts {
                            accumulate: true,
                            ..Default::default()
                        },
                    )?),
                    Some(pn) => {
                        d.extend(kernels::mat(
                            gpu,
                            wt,
                            input,
                            &a.tmp,
                            &a.step,
                            &a.dummy,
                            &MatOpts::default(),
                        )?);
                        d.push(norm(&a.tmp, pn, &a.x, true, When::Always)?);
                    }
                }
                Ok(())
            };
        residual(&mut d, &l.wo, &l.post_attn_norm, &a.attn)?;
        // FFN input side into `hidden`: one fused matvec (norm, gate, up, activation) for decode
        // when gate and up share a buffer; for batches the norm into `xn` (unless a previous
        // dispatch of this layer made it), the matmul and the activation.
        let ffn_in = |d: &mut Vec<Dispatch>, f: &DenseFfn, batch_norm: bool| -> Result<()> {
            let fused = kernels::matvec_glu(
                gpu,
                &f.gate_up,
                &a.x,
                &a.hidden,
                &a.dummy,
                Some((&l.ffn_norm, c.rms_eps)),
                c.activation,
            )?;
            let glu_when = match fused {
                Some(fd) => {
                    d.push(fd);
                    When::Batch
                }
                None => {
                    d.extend(kernels::mat(
                        gpu,
                        &f.gate_up,
                        &a.x,
                        &a.gate_up,
                        &a.step,
                        &a.dummy,
                        &MatOpts {
                            norm: Some((&l.ffn_norm, c.rms_eps)),
                            when: When::Decode,
                            ..Default::default()
                        },
                    )?);
                    When::Always
                }
            };
            if batch_norm {
                d.push(norm(&a.x, &l.ffn_norm, &a.xn, false, When::Batch)?);
            }
            d.extend(kernels::mat(
                gpu,
                &f.gate_up,
                &a.xn,
                &a.gate_up,
                &a.step,
                &a.dummy,
                &MatOpts {
                    when: When::Batch,
                    ..Default::default()
                },
            )?);
            d.push(kernels::glu(
                gpu,
                &a.gate_up,
                &a.hidden,
                &a.step,
                f.n_ff,
                c.activation,
                glu_when,
            )?);
            Ok(())
        };
        match &l.ffn {
            Ffn::Dense(f) => {
                ffn_in(&mut d, f, true)?;
                residual(&mut d, &f.down, &l.post_ffn_norm, &a.hidden)?;
            }
            Ffn::Moe(m) => {
                let (Some(mc), Some(mb)) = (&c.moe, &a.moe) else {
                    return Err(Error::InvalidArgument(
                        "an MoE layer in a model without MoE metadata".into(),
                    ));
                };
                let r = &mc.routing;
                let norm_w = Some((&l.ffn_norm, c.rms_eps));
                // Router logits (decode: the norm in the matvec prologue; batches: the norm
                // into xn, which the experts read too), then top-k and weights on the GPU.
                normed_mat(&mut d, &m.router, &l.ffn_norm, &mb.logits, None)?;
                d.push(moe::router(
                    gpu,
                    &mb.logits,
                    m.bias.as_ref(),
                    &mb.route,
                    &a.step,
                    &a.dummy,
                    r,
                )?);
                // Decode: gate/up of the k experts (and the shared expert's, which reads x
                // too, so before anything adds to x), then down + weights + sum into x.
                d.extend(moe::gate_up(
                    gpu,
                    &m.gate_up,
                    &a.x,
                    &mb.h,
                    &mb.route,
                    &a.dummy,
                    norm_w,
                    r,
                    c.activation,
                    None,
                )?);
                if let Some(sh) = &m.shared {
                    ffn_in(&mut d, sh, false)?;
                }
                d.extend(moe::down(gpu, &m.down, &mb.h, &a.x, &mb.route, r, None)?);
                // Batches: tokens per expert, experts read once per pass, weighted sum.
                d.push(moe::sort(gpu, &mb.route, &mb.lists, &a.step, r)?);
                d.extend(moe::gate_up_batch(
                    gpu,
                    &m.gate_up,
                    &a.xn,
                    &mb.h,
                    &mb.lists,
                    r,
                    c.activation,
                )?);
                d.extend(moe::down_batch(
                    gpu, &m.down, &mb.h, &mb.o, &mb.lists, &mb.route, r,
                )?);
                d.push(moe::combine(gpu, &mb.o, &a.x, &a.step, c.n_embd, r)?);
                if let Some(sh) = &m.shared {
                    residual(&mut d, &sh.down, &l.post_ffn_norm, &a.hidden)?;
                }
            }
        }
    }
    d.push(kernels::rmsnorm(
        gpu,
        &a.x,
        &w.output_norm,
        &a.out_norm,
        &a.step,
        c.n_embd,
        c.rms_eps,
        NormOpts {
            accumulate: false,
            rows: Rows::Out,
            when: When::Always,
            subgroups: true,
        },
    )?);
    d.extend(kernels::mat(
        gpu,
        w.output.as_ref().unwrap_or(&w.token_embd),
        &a.out_norm,
        &a.logits,
        &a.step,
        &a.dummy,
        &MatOpts {
            rows: Rows::Out,
            ..Default::default()
        },
    )?);
    Ok(d)
}
