//! A session: one conversation's state on the GPU (its memory [`Plan`], the forward pass recorded
//! once, the KV cache's position and token history) and the passes that move it: prefill,
//! decode (one pass run ahead of the host), `verify` for speculative decoding, and `eval` for
//! logits.

use std::sync::Arc;

use crate::kernels::{self, Dispatch, Seqs, StepInfo, StepUniform};
use crate::sampling::Sampler;
use crate::speculative::SpeedGuard;
use crate::{Error, Result};

use super::mtp::Mtp;
use super::plan::{kv_caches, Activations, LayerKv, Plan};
use super::recipe::record_forward;
use super::{Model, SessionOptions};

pub struct Session {
    pub model: Arc<Model>,
    pub opts: SessionOptions,
    /// Most rows of logits one pass can return.
    pub max_out: u32,
    pub(super) act: Activations,
    /// Its KV cache: its own, or a share of a [`SessionSet`](super::SessionSet)'s.
    _kv: Vec<LayerKv>,
    /// Its sequence in the KV buffers (its slot in a session set; 0 when it has its own).
    pub(super) seq: u32,
    pub(super) forward: Vec<Dispatch>,
    pub(super) greedy: [Dispatch; 2],
    /// Greedy sampling of every output row into `act.targets` (a speculative verification).
    pub(super) verify_greedy: [Dispatch; 2],
    /// The MTP layer, where the model has one.
    pub(super) mtp: Option<Mtp>,
    sample: kernels::SampleKernels,
    /// Two readback buffers for sampled ids, used in turn: a pass run ahead copies its id into
    /// one while the host reads the other.
    staging: [wgpu::Buffer; 2],
    /// Readback of a verification's ids (`max_out` words).
    verify_staging: wgpu::Buffer,
    /// The staging buffer the next sampling pass copies into.
    next_staging: usize,
    /// Positions in the KV cache, counting a pass run ahead.
    pub(super) pos: u32,
    /// The ids at positions 0..pos (for prompt-prefix reuse; the id a pass run ahead fed joins
    /// when the host reads it), and the id sampled last, which the next decode step feeds from
    /// the GPU.
    pub(super) history: Vec<u32>,
    pub(super) sampled: Option<u32>,
    /// The readback of a decode pass submitted ahead of its `decode` call (see there).
    ahead: Option<Readback>,
    /// Whether `decode` runs one pass ahead. On by default, except on a CPU adapter (lavapipe,
    /// SwiftShader): there a pass takes seconds, so the host's share that running ahead hides is
    /// noise, while the pass undone at the end of every reply costs a whole step.
    pub run_ahead: bool,
    /// What the speed guard of this session's generations measured (speculative rounds against
    /// plain steps on this GPU and model), kept from one request to the next so that a turn
    /// does not time both again ([`crate::speculative::SpecDecoder`]).
    pub(crate) speed_guard: Option<SpeedGuard>,
}

/// Where and when a sampling pass copies its id for the host.
pub(super) struct Readback {
    staging: usize,
    submission: wgpu::SubmissionIndex,
}

impl Session {
    pub async fn new(model: Arc<Model>, opts: SessionOptions) -> Result<Session> {
        let gpu = model.gpu.clone();
        gpu.scoped("planning the session", || {
            let kv = kv_caches(&gpu, &model.config, opts, 1)?;
            Session::plan(model, opts, kv, 0)
        })
        .await
    }

    /// A session over sequence `seq` of the KV caches `kv`.
    pub(super) fn plan(
        model: Arc<Model>,
        opts: SessionOptions,
        kv: Vec<LayerKv>,
        seq: u32,
    ) -> Result<Session> {
        let gpu = &*model.gpu;
        let c = &model.config;
        let Plan { act, mtp, max_out } = Plan::new(gpu, &model, opts)?;
        let max_verify = max_out.min(opts.ubatch);
        let mtp = mtp
            .map(|b| Mtp::new(&model, &act, b, max_verify, opts))
            .transpose()?;
        let forward = record_forward(gpu, &model, &act, &kv, opts)?;
        let greedy = kernels::argmax(
            gpu,
            &act.logits,
            &act.tokens,
            &act.argmax_partial,
            c.n_vocab,
            1,
        )?;
        let verify_greedy = kernels::argmax(
            gpu,
            &act.logits,
            &act.targets,
            &act.argmax_partial,
            c.n_vocab,
            max_out,
        )?;
        let sample = kernels::sample(gpu, &act.logits, &act.tokens, c.n_vocab, 0)?;
        let readback = |size: u64| {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("token readback"),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        let staging = [readback(4), readback(4)];
        let verify_staging = readback(max_out as u64 * 4);
        Ok(Session {
            model: model.clone(),
            opts,
            max_out,
            act,
            _kv: kv,
            seq,
            forward,
            greedy,
            verify_greedy,
            mtp,
            sample,
            staging,
            verify_staging,
            next_staging: 0,
            pos: 0,
            history: Vec::new(),
            sampled: None,
            ahead: None,
            run_ahead: gpu.info.device_type != wgpu::DeviceType::Cpu,
            speed_guard: None,
        })
    }

    /// Tokens in the KV cache (not counting a decode pass run ahead).
    pub fn pos(&self) -> u32 {
        self.pos - self.ahead.is_some() as u32
    }

    /// Forgets every position from `pos` on (a new conversation, or rejected draft tokens).
    pub fn truncate(&mut self, pos: u32) {
        self.discard_ahead();
        if let Some(m) = &mut self.mtp {
            // The MTP pair at position j holds the token at j + 1.
            m.valid = m.valid.min(pos.saturating_sub(1));
            if pos < self.pos {
                m.pending = false;
            }
        }
        self.pos = self.pos.min(pos);
        self.history.truncate(self.pos as usize);
        self.sampled = None;
    }

    /// Makes `id` the token the next [`Session::decode`] feeds: the latest token, known to the
    /// host but not to the GPU (a speculative round's last, when plain steps take over).
    pub fn set_next_token(&mut self, id: u32) {
        self.discard_ahead();
        self.model
            .gpu
            .queue
            .write_buffer(&self.act.tokens, 0, bytemuck::bytes_of(&id));
        self.sampled = Some(id);
    }

    /// The token ids in the KV cache, in order.
    pub fn history(&self) -> &[u32] {
        &self.history[..self.pos() as usize]
    }

    /// Undoes a decode pass run ahead: its position leaves the cache's count (the slot is
    /// overwritten later) and the token it fed leaves the history, and the id it sampled over
    /// the GPU's input token is replaced by the one the host holds, so a later decode feeds that.
    pub(super) fn discard_ahead(&mut self) {
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

    /// Dispatches one token's decode records at the session's last position (a tracked number:
    /// launches are the budget). The most a step records: past the first 64 keys attention
    /// splits them, and its combine is one dispatch more a layer.
    pub fn dispatches_per_token(&self) -> usize {
        self.dispatches_at(self.opts.ctx.saturating_sub(1))
    }

    /// Dispatches one token's decode records at position `pos`.
    pub fn dispatches_at(&self, pos: u32) -> usize {
        let s = StepInfo::new(1, pos, 1);
        self.forward
            .iter()
            .chain(&self.greedy)
            .filter(|d| (d.grid)(&s).is_some())
            .count()
    }

    pub(super) fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
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
    pub(super) fn pass(
        &mut self,
        tokens: Option<&[u32]>,
        n_tokens: u32,
        n_out: u32,
        mut sampler: Option<&mut Sampler>,
    ) -> Option<Readback> {
        let gpu = self.model.gpu.clone();
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        let kept = match tokens {
            None if n_tokens == 1 => self.kept_row(&mut encoder),
            _ => None,
        };
        let s = self.feed(tokens, n_tokens, n_out);
        if let Some(sm) = sampler.as_deref_mut() {
            if !sm.params.is_greedy() {
                let u = sm.next_uniform();
                self.sample.prepare(&gpu, &sm.params, &self.history, u);
            }
        }
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
        if let (Some(row), Some(m)) = (kept, &mut self.mtp) {
            // This step's hidden state (its head's norm) joins the MTP layer's pending pairs.
            let bytes = self.model.config.n_embd as u64 * 4;
            encoder.copy_buffer_to_buffer(
                &self.act.out_norm,
                0,
                &m.bufs.h,
                row as u64 * bytes,
                bytes,
            );
            m.pending = true;
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

    /// Writes a pass's inputs: `tokens` from the host (entered in the history; `None`: the token
    /// sampled last, already on the GPU) and the step uniform; returns the pass's shape.
    pub(super) fn feed(&mut self, tokens: Option<&[u32]>, n_tokens: u32, n_out: u32) -> StepInfo {
        if let Some(m) = &mut self.mtp {
            m.pending = false;
        }
        let gpu = &self.model.gpu;
        if let Some(t) = tokens {
            gpu.queue
                .write_buffer(&self.act.tokens, 0, bytemuck::cast_slice(t));
            self.history.extend_from_slice(t);
            self.sampled = None;
        }
        let s = StepInfo {
            seqs: Seqs::One(self.seq),
            ..StepInfo::new(n_tokens, self.pos, n_out)
        };
        gpu.queue.write_buffer(
            &self.act.step,
            0,
            bytemuck::bytes_of(&StepUniform::new(s, self.model.config.n_head)),
        );
        s
    }

    /// Most tokens one verification pass takes (the last accepted token and the drafts).
    pub fn max_verify(&self) -> u32 {
        self.max_out.min(self.opts.ubatch)
    }

    /// A speculative verification: feeds `tokens` (the last accepted token, then the drafts) in
    /// one pass and returns the greedy next token after each of them, argmax on the GPU, one
    /// submit and one readback of the ids. The caller keeps the agreeing prefix and forgets the
    /// rest with [`Session::truncate`].
    pub async fn verify(&mut self, tokens: &[u32]) -> Result<Vec<u32>> {
        self.discard_ahead();
        self.check_tokens(tokens)?;
        let n = tokens.len() as u32;
        if n == 0 || n > self.max_verify() {
            return Err(Error::InvalidArgument(format!(
                "a verification takes 1..={} tokens, not {n} (lower the draft length)",
                self.max_verify()
            )));
        }
        let s = self.feed(Some(tokens), n, n);
        let gpu = self.model.gpu.clone();
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            for d in self.forward.iter().chain(&self.verify_greedy) {
                d.record(&mut pass, &s);
            }
        }
        let bytes = n as u64 * 4;
        encoder.copy_buffer_to_buffer(&self.act.targets, 0, &self.verify_staging, 0, bytes);
        let submission = gpu.submit(encoder.finish());
        self.pos += n;
        let ids = gpu
            .map_staging(&self.verify_staging, bytes, submission)
            .await?;
        Ok(bytemuck::pod_collect_to_vec(&ids))
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

    pub(super) async fn read_token(&mut self, r: Readback) -> Result<u32> {
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
