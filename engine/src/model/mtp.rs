//! Multi-token prediction in a session: the MTP layer's KV cache follows the target's, and a
//! speculative round drafts with the MTP layer chained on the GPU and verifies in one target
//! pass, with one readback.
//!
//! MTP position `j` holds the pair (`h_j`, `t_{j+1}`): the target's hidden state at position `j`
//! (after its final norm) and the token after it, so the layer's output there predicts
//! `t_{j+2}`. Positions `[0, valid)` hold the right pairs; the pairs of the last target pass's
//! positions wait for the token after them, so the next round's first draft step makes them
//! all, its last row (the one with the token the round starts from) giving the first draft:
//! the MTP layer catches up on a round's verified tokens in the next round's first step rather
//! than in a pass of its own.

use crate::gpu::Gpu;
use crate::kernels::{self, Dispatch, NormOpts, Rows, StepInfo, StepUniform, When};
use crate::sampling::Sampler;
use crate::speculative::{accept_sampled, accepted_prefix};
use crate::{Error, Result};

use super::plan::{Activations, MtpBuffers, SessionOptions};
use super::recipe::record_mtp;
use super::{Model, Session};

/// A session's MTP layer: its buffers, its pass recorded once, and where its cache stands.
pub(super) struct Mtp {
    pub(super) bufs: MtpBuffers,
    /// The MTP pass over `bufs.tokens` and `bufs.h` ([`record_mtp`]).
    forward: Vec<Dispatch>,
    /// Greedy draft: the argmax of the MTP pass's logits row into `bufs.tokens[0]`, the next
    /// draft step's input.
    greedy: [Dispatch; 2],
    /// `bufs.h = RMSNorm(x) * output_norm` for every token of a target pass: its hidden states,
    /// the pairs' `h` (what the target's head computes for its output rows, for all rows).
    fill: Dispatch,
    /// The step uniforms of a round's draft steps, copied into `bufs.step` before each (one
    /// submit holds several passes of different shapes).
    steps: wgpu::Buffer,
    /// The drafts of a round, `[max_verify]` u32.
    drafts: wgpu::Buffer,
    /// Readback of a round: the target's ids, then the drafts.
    staging: wgpu::Buffer,
    /// Readback of a sampled round's logits rows, `[max_verify, n_vocab]`.
    logits_staging: wgpu::Buffer,
    /// MTP positions `[0, valid)` hold the right pairs.
    pub(super) valid: u32,
    /// `bufs.h` rows `0 .. pos - valid` hold the target's hidden states at positions `valid ..`
    /// of the session's cache, the pairs the next round's first draft step makes: set by
    /// [`Session::mtp_prefill`] and [`Session::mtp_round`], cleared by any other pass and by a
    /// roll-back.
    pub(super) pending: bool,
    /// Plain decode steps keep their hidden states as pending pairs ([`Session::keep_mtp_pairs`]),
    /// so that speculation resumes without feeding those positions to the target again.
    pub(super) keep: bool,
}

impl Mtp {
    pub(super) fn new(
        model: &Model,
        act: &Activations,
        bufs: MtpBuffers,
        max_verify: u32,
        opts: SessionOptions,
    ) -> Result<Mtp> {
        let (gpu, c) = (&*model.gpu, &model.config);
        // The MTP passes share the session's activations, with their own token ids and step.
        let mut view = act.clone();
        view.tokens = bufs.tokens.clone();
        view.step = bufs.step.clone();
        let forward = record_mtp(gpu, model, &view, &bufs, opts)?;
        let greedy = kernels::argmax(
            gpu,
            &act.logits,
            &bufs.tokens,
            &act.argmax_partial,
            c.n_vocab,
            1,
        )?;
        let fill = kernels::rmsnorm(
            gpu,
            &act.x,
            &model.weights.output_norm,
            &bufs.h,
            &act.step,
            c.n_embd,
            c.rms_eps,
            NormOpts {
                accumulate: false,
                rows: Rows::Tokens,
                when: When::Always,
                subgroups: true,
                y_cols: None,
            },
        )?;
        let n = max_verify as u64;
        let uniform = size_of::<StepUniform>() as u64;
        let readback = |label, size| {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        Ok(Mtp {
            forward,
            greedy,
            fill,
            steps: gpu.storage("mtp_steps", n * uniform)?,
            drafts: gpu.storage("mtp_drafts", n * 4)?,
            staging: readback("mtp readback", 2 * n * 4),
            logits_staging: readback("mtp logits readback", n * c.n_vocab as u64 * 4),
            bufs,
            valid: 0,
            pending: false,
            keep: false,
        })
    }

    /// Records the MTP pass for the shape `s` (its step uniform already in `bufs.step`).
    fn record(&self, encoder: &mut wgpu::CommandEncoder, s: &StepInfo, greedy: bool) {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        let tail: &[Dispatch] = if greedy { &self.greedy } else { &[] };
        for d in self.forward.iter().chain(tail) {
            d.record(&mut pass, s);
        }
    }
}

impl Session {
    /// Whether the model has an MTP layer to draft with.
    pub fn has_mtp(&self) -> bool {
        self.mtp.is_some()
    }

    /// Dispatches one MTP draft step records at the session's last position (the MTP pass of
    /// one token and its argmax; a tracked number like [`Session::dispatches_per_token`]);
    /// `None` without an MTP layer.
    pub fn dispatches_per_draft(&self) -> Option<usize> {
        let m = self.mtp.as_ref()?;
        let s = draft_step(self.opts.ctx.max(1), 0);
        Some(
            m.forward
                .iter()
                .chain(&m.greedy)
                .filter(|d| (d.grid)(&s).is_some())
                .count(),
        )
    }

    fn mtp_ref(&self) -> Result<&Mtp> {
        self.mtp.as_ref().ok_or_else(|| {
            Error::InvalidArgument(
                "this model has no MTP layer: speculate with a draft model instead".into(),
            )
        })
    }

    /// Feeds `prompt` (reusing what the caches hold of it) with the MTP layer kept in step, and
    /// returns the next token `sampler` draws and the number of prompt tokens fed. Starts a run
    /// of [`Session::mtp_round`]s.
    pub async fn mtp_prefill(
        &mut self,
        prompt: &[u32],
        sampler: &mut Sampler,
    ) -> Result<(u32, usize)> {
        let valid = self.mtp_ref()?.valid;
        let p = prompt.len();
        if p == 0 {
            return Err(Error::InvalidArgument("the prompt is empty".into()));
        }
        // Keep the positions whose target KV and MTP pair are both right: the pair at the
        // first position fed must be made here, from its hidden state.
        let common = self
            .history()
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        let start = (valid as usize).min(common.saturating_sub(1)).min(p - 1);
        self.truncate(start as u32);
        self.check_tokens(&prompt[start..])?;
        let ubatch = self.opts.ubatch as usize;
        let last_p0 = start + (p - 1 - start) / ubatch * ubatch;
        let mut readback = None;
        for p0 in (start..p).step_by(ubatch) {
            let chunk = &prompt[p0..(p0 + ubatch).min(p)];
            let last = p0 == last_p0;
            let sampling = last.then_some(&mut *sampler);
            readback = self.pass(Some(chunk), chunk.len() as u32, last as u32, sampling);
            // The pairs of this chunk: each token's hidden state with the prompt token after
            // it; the last chunk's wait for the first round, which has the token after the last.
            let pairs = if last { 0 } else { chunk.len() };
            self.mtp_catch_up(&prompt[p0 + 1..p0 + 1 + pairs], p0 as u32);
        }
        let id = self
            .read_token(readback.expect("the last chunk samples"))
            .await?;
        let m = self.mtp.as_mut().expect("checked above");
        m.valid = last_p0 as u32;
        m.pending = true;
        Ok((id, p - start))
    }

    /// After a target pass over positions `pos0..`: its hidden states into the MTP's `h`, then
    /// the MTP pass over the pairs (`h_{pos0 + j}`, `next[j]`) where there are any, one submit.
    fn mtp_catch_up(&mut self, next: &[u32], pos0: u32) {
        let gpu = self.model.gpu.clone();
        let m = self.mtp.as_ref().expect("an MTP layer");
        let main = StepInfo::new(self.pos - pos0, pos0, 0);
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            m.fill.record(&mut pass, &main);
        }
        self.record_pairs(&mut encoder, next, pos0);
        gpu.submit(encoder.finish());
    }

    /// Records the MTP pass over the pairs (`h` row j, `next[j]`) at MTP positions `pos0..`
    /// (nothing without pairs); writes its token ids and step uniform.
    fn record_pairs(&self, encoder: &mut wgpu::CommandEncoder, next: &[u32], pos0: u32) {
        if next.is_empty() {
            return;
        }
        let m = self.mtp.as_ref().expect("an MTP layer");
        let queue = &self.model.gpu.queue;
        let s = StepInfo::new(next.len() as u32, pos0, 0);
        queue.write_buffer(&m.bufs.tokens, 0, bytemuck::cast_slice(next));
        let step = StepUniform::new(s, self.model.config.n_head);
        queue.write_buffer(&m.bufs.step, 0, bytemuck::bytes_of(&step));
        m.record(encoder, &s, false);
    }

    /// Plain decode steps from now on keep their hidden states as the MTP layer's pending pairs
    /// (where they follow an MTP prefill or round): a speculative round after them makes their
    /// pairs in its first draft step, with no target pass over them again ([`resume`]). The
    /// speed guard's plain steps ask for it.
    ///
    /// [`resume`]: crate::speculative::resume
    pub fn keep_mtp_pairs(&mut self) {
        let room = self.opts.ubatch >= 2;
        if let Some(m) = &mut self.mtp {
            m.keep = m.pending && room;
        }
    }

    /// Whether the MTP layer can draft after the session's positions without a target pass:
    /// every position since its last pair is pending ([`Session::keep_mtp_pairs`]).
    pub fn mtp_pairs_pending(&self) -> bool {
        self.mtp.as_ref().is_some_and(|m| m.pending)
    }

    /// For a plain decode step about to be recorded at `self.pos` whose hidden state joins the
    /// pending pairs ([`Mtp::keep`]): its row of `bufs.h`. Where the rows are full (a pass's
    /// `ubatch`), first makes the pairs of all but the last (whose next token the host may not
    /// know yet: the step that feeds it runs ahead) and moves that one to row 0.
    pub(super) fn kept_row(&mut self, encoder: &mut wgpu::CommandEncoder) -> Option<u32> {
        let m = self.mtp.as_ref().filter(|m| m.keep && m.pending)?;
        let (valid, pos) = (m.valid, self.pos);
        let row = pos - valid;
        if row < self.opts.ubatch {
            return Some(row);
        }
        let next = self.history[valid as usize + 1..pos as usize].to_vec();
        self.record_pairs(encoder, &next, valid);
        let m = self.mtp.as_ref().expect("an MTP layer");
        // The last row to row 0 through the pairs' scratch (a copy within one buffer is not
        // allowed), after the MTP pass has read it.
        let bytes = self.model.config.n_embd as u64 * 4;
        encoder.copy_buffer_to_buffer(&m.bufs.h, (row - 1) as u64 * bytes, &m.bufs.eh, 0, bytes);
        encoder.copy_buffer_to_buffer(&m.bufs.eh, 0, &m.bufs.h, 0, bytes);
        self.mtp.as_mut().expect("an MTP layer").valid = pos - 1;
        Some(1)
    }

    /// Checks that an MTP round can follow ([`Mtp::pending`]) and writes its draft steps'
    /// inputs: the first step's tokens (those after the pending pairs' positions, the last one
    /// `last`) and the step uniforms of `draft_steps` steps. Returns the first step's shape.
    fn mtp_inputs(&self, last: u32, draft_steps: u32) -> Result<StepInfo> {
        let m = self.mtp_ref()?;
        if !m.pending {
            return Err(Error::InvalidArgument(
                "an MTP round follows mtp_prefill or another round".into(),
            ));
        }
        let pos0 = self.pos;
        let tokens = [&self.history[m.valid as usize + 1..pos0 as usize], &[last]].concat();
        let first = StepInfo::new(tokens.len() as u32, m.valid, 1);
        let n_head = self.model.config.n_head;
        let steps: Vec<StepUniform> = [first]
            .into_iter()
            .chain((1..draft_steps).map(|i| draft_step(pos0, i)))
            .map(|s| StepUniform::new(s, n_head))
            .collect();
        let queue = &self.model.gpu.queue;
        queue.write_buffer(&m.steps, 0, bytemuck::cast_slice(&steps));
        queue.write_buffer(&m.bufs.tokens, 0, bytemuck::cast_slice(&tokens));
        Ok(first)
    }

    /// Records and submits `draft_steps` MTP draft steps chained on the GPU, one submit each (so
    /// that the GPU starts on the first while the host records the rest of the round): the first
    /// (shape `first`) makes the pending pairs, from the hidden states in `bufs.h` and the tokens
    /// in `bufs.tokens`, each later one the pair of the previous one's head norm and greedy
    /// draft; the first `n` drafts go to the target's token ids after `last` and to `drafts`.
    fn submit_drafts(&self, first: StepInfo, draft_steps: u32, n: usize) {
        let m = self.mtp.as_ref().expect("an MTP layer");
        let gpu = &self.model.gpu;
        let uniform = size_of::<StepUniform>() as u64;
        for i in 0..draft_steps {
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            encoder.copy_buffer_to_buffer(&m.steps, i as u64 * uniform, &m.bufs.step, 0, uniform);
            let s = if i == 0 {
                first
            } else {
                draft_step(self.pos, i)
            };
            m.record(&mut encoder, &s, true);
            if (i as usize) < n {
                let at = (i as u64 + 1) * 4;
                encoder.copy_buffer_to_buffer(&m.bufs.tokens, 0, &self.act.tokens, at, 4);
                encoder.copy_buffer_to_buffer(&m.bufs.tokens, 0, &m.drafts, at - 4, 4);
            }
            gpu.submit(encoder.finish());
        }
    }

    /// The logits of the MTP layer's first draft after `last` (its greedy pick is the first
    /// draft), for the golden test.
    #[cfg(test)]
    pub(crate) async fn mtp_draft_logits(&mut self, last: u32) -> Result<Vec<f32>> {
        self.discard_ahead();
        let first = self.mtp_inputs(last, 1)?;
        self.submit_drafts(first, 1, 0);
        let gpu = self.model.gpu.clone();
        gpu.read_f32(&self.act.logits, 0, self.model.config.n_vocab as usize)
            .await
    }

    /// One speculative round after `last` (the target's latest token, not yet fed): the MTP
    /// layer makes the pending pairs and drafts `n` tokens chained on the GPU, the target
    /// verifies `[last, drafts..]` in one pass and leaves its hidden states for the next
    /// round's pairs; one readback (the ids; with sampling, the rows' logits for
    /// [`accept_sampled`]), the work submitted in pieces as it is recorded. Keeps the accepted prefix (rolling both KV caches back) and returns
    /// the drafts, how many were accepted, and the target's next token (not yet fed).
    pub async fn mtp_round(
        &mut self,
        last: u32,
        n: usize,
        sampler: &mut Sampler,
    ) -> Result<(Vec<u32>, usize, u32)> {
        self.discard_ahead();
        let fed = n as u32 + 1;
        if fed > self.max_verify() {
            return Err(Error::InvalidArgument(format!(
                "{n} drafts do not fit one verification of at most {} tokens (lower the draft \
                 length)",
                self.max_verify()
            )));
        }
        self.check_tokens(&vec![last; fed as usize])?;
        // One draft step runs even without drafts: it makes the pending pairs.
        let draft_steps = n.max(1) as u32;
        let first = self.mtp_inputs(last, draft_steps)?;
        self.mtp.as_mut().expect("checked in mtp_inputs").keep = false;
        let pos0 = self.pos;
        let history = [self.history(), &[last]].concat();
        let gpu = self.model.gpu.clone();
        gpu.queue
            .write_buffer(&self.act.tokens, 0, bytemuck::bytes_of(&last));
        // The drafts reach the target's token ids on the GPU.
        let main = self.feed(None, fed, fed);
        self.sampled = None;
        let greedy = sampler.params.is_greedy();
        self.submit_drafts(first, draft_steps, n);
        let m = self.mtp.as_ref().expect("checked in mtp_inputs");
        // The verify pass in two submits, the first half running while the rest is recorded.
        let (front, back) = self.forward.split_at(self.forward.len() / 2);
        gpu.submit(encode(&gpu, front, &main).finish());
        let argmax: &[Dispatch] = if greedy { &self.verify_greedy } else { &[] };
        let tail = back.iter().chain(argmax).chain([&m.fill]);
        let mut encoder = encode(&gpu, tail, &main);
        let logits_bytes = fed as u64 * self.model.config.n_vocab as u64 * 4;
        if !greedy {
            encoder.copy_buffer_to_buffer(&self.act.logits, 0, &m.logits_staging, 0, logits_bytes);
        }
        if n > 0 {
            encoder.copy_buffer_to_buffer(&m.drafts, 0, &m.staging, fed as u64 * 4, n as u64 * 4);
        }
        encoder.copy_buffer_to_buffer(&self.act.targets, 0, &m.staging, 0, fed as u64 * 4);
        let submission = gpu.submit(encoder.finish());
        self.pos += fed;
        let bytes = (fed as u64 + n as u64) * 4;
        let ids: Vec<u32> = bytemuck::pod_collect_to_vec(
            &gpu.map_staging(&m.staging, bytes, submission.clone())
                .await?,
        );
        let (targets, drafts) = ids.split_at(fed as usize);
        let (k, next) = if greedy {
            let k = accepted_prefix(drafts, targets);
            (k, targets[k])
        } else {
            let rows: Vec<f32> = bytemuck::pod_collect_to_vec(
                &gpu.map_staging(&m.logits_staging, logits_bytes, submission)
                    .await?,
            );
            accept_sampled(&rows, drafts, &history, sampler)
        };
        let drafts = drafts.to_vec();
        self.history.push(last);
        self.history.extend_from_slice(&drafts);
        self.truncate(pos0 + k as u32 + 1);
        // The first draft step made the pairs up to `pos0`; the verified positions' wait.
        let m = self.mtp.as_mut().expect("checked in mtp_inputs");
        m.valid = pos0;
        m.pending = true;
        Ok((drafts, k, next))
    }
}

/// A command encoder with one compute pass over `dispatches` in the shape `s`.
fn encode<'d>(
    gpu: &Gpu,
    dispatches: impl IntoIterator<Item = &'d Dispatch>,
    s: &StepInfo,
) -> wgpu::CommandEncoder {
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        for d in dispatches {
            d.record(&mut pass, s);
        }
    }
    encoder
}

/// The shape of draft step `i` of a round whose first fed token is at `pos0` when it makes one
/// pair: the one at MTP position `pos0 - 1 + i` (the first step makes the pending pairs, up to
/// `pos0 - 1`, the last one alone where only it is pending).
fn draft_step(pos0: u32, i: u32) -> StepInfo {
    StepInfo::new(1, pos0 - 1 + i, 1)
}
