//! A set of sessions on one model whose KV caches share one buffer per layer (session i is
//! sequence i of it), and the batched decode step that runs the next token of several of them
//! as one forward pass: every weight is read once for all their rows (the small-batch matrix
//! kernels), each row attending to its own sequence's keys through the row table
//! (wgsl/common/rows.wgsl) and taking its token by its own sampler (the argmax of every row,
//! then the sampling kernels of each sampled row). `tandem serve --parallel N` steps its slots
//! this way; prompts are still fed one session at a time ([`Session::prefill`]) between steps.

use std::sync::Arc;

use crate::kernels::{self, Dispatch, Row, SampleKernels, Seqs, StepInfo, StepUniform};
use crate::sampling::Sampler;
use crate::{Error, Result};

use super::plan::{kv_caches, Activations};
use super::recipe::record_forward;
use super::{Model, Session, SessionOptions};

pub struct SessionSet {
    sessions: Vec<Session>,
    /// The batched step's activations: one row per session.
    act: Activations,
    /// The forward pass over `act` and the shared KV caches, rows placed by the row table.
    forward: Vec<Dispatch>,
    /// Greedy sampling of every row into `act.tokens` (the verify path's argmax over rows).
    greedy: [Dispatch; 2],
    /// Sampling of row k into `act.tokens[k]`, for the rows whose sampler is not greedy.
    sample: Vec<SampleKernels>,
    /// Readback of a step's ids, one word per session.
    staging: wgpu::Buffer,
}

impl SessionSet {
    /// `n_seq` sessions with `opts` each, their KV caches in one buffer per layer (which must
    /// fit a storage binding: [`SessionOptions::check_set`]).
    pub async fn new(model: Arc<Model>, opts: SessionOptions, n_seq: u32) -> Result<SessionSet> {
        if n_seq == 0 {
            return Err(Error::InvalidArgument(
                "a session set needs at least one session".into(),
            ));
        }
        let gpu = model.gpu.clone();
        gpu.scoped("planning the sessions", || {
            SessionSet::plan(model, opts, n_seq)
        })
        .await
    }

    fn plan(model: Arc<Model>, opts: SessionOptions, n_seq: u32) -> Result<SessionSet> {
        let gpu = &*model.gpu;
        let c = &model.config;
        let kv = kv_caches(gpu, c, opts, n_seq)?;
        let sessions = (0..n_seq)
            .map(|seq| Session::plan(model.clone(), opts, kv.clone(), seq))
            .collect::<Result<Vec<_>>>()?;
        let step_opts = SessionOptions {
            ubatch: n_seq,
            outputs: n_seq,
            ..opts
        };
        let (act, max_out) = Activations::new(gpu, &model, step_opts)?;
        if max_out < n_seq {
            return Err(Error::Limits {
                what: format!(
                    "a storage binding for the logits of {n_seq} sequences' step (lower the \
                     parallel slots)"
                ),
                need: n_seq as u64 * c.n_vocab as u64 * 4,
                have: gpu.max_binding(),
            });
        }
        let forward = record_forward(gpu, &model, &act, &kv, step_opts)?;
        let greedy = kernels::argmax(
            gpu,
            &act.logits,
            &act.tokens,
            &act.argmax_partial,
            c.n_vocab,
            n_seq,
        )?;
        let sample = (0..n_seq)
            .map(|row| kernels::sample(gpu, &act.logits, &act.tokens, c.n_vocab, row))
            .collect::<Result<Vec<_>>>()?;
        let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("batched step readback"),
            size: n_seq as u64 * 4,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Ok(SessionSet {
            sessions,
            act,
            forward,
            greedy,
            sample,
            staging,
        })
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    pub fn session(&self, i: usize) -> &Session {
        &self.sessions[i]
    }

    pub fn session_mut(&mut self, i: usize) -> &mut Session {
        &mut self.sessions[i]
    }

    /// One decode step of the sessions in `rows` (distinct indices, each with its sampler) in
    /// one forward pass: each feeds the token it sampled last at its next position, as
    /// [`Session::decode`] would, and takes the next with its sampler: the argmax of its row where
    /// the sampler is greedy, else the sampling kernels with the sampler's parameters, its
    /// session's history and its next random number (one a step, as a session's own pass draws).
    /// Returns the ids in the order of `rows`; one submit, one readback. A session's pass run
    /// ahead is undone first.
    pub async fn decode(&mut self, rows: &mut [(usize, &mut Sampler)]) -> Result<Vec<u32>> {
        let n = rows.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut table = Vec::with_capacity(n);
        let mut fed = Vec::with_capacity(n);
        for k in 0..n {
            let i = rows[k].0;
            if i >= self.sessions.len() || rows[..k].iter().any(|r| r.0 == i) {
                let which: Vec<usize> = rows.iter().map(|r| r.0).collect();
                return Err(Error::InvalidArgument(format!(
                    "a batched step takes distinct sessions below {}, not {which:?}",
                    self.sessions.len()
                )));
            }
            let s = &mut self.sessions[i];
            s.discard_ahead();
            s.check_tokens(&[0])?;
            let Some(id) = s.sampled else {
                return Err(Error::InvalidArgument(format!(
                    "session {i} has no sampled token to decode from"
                )));
            };
            table.push(Row {
                seq: s.seq,
                pos: s.pos,
            });
            fed.push(id);
        }
        let gpu = self.sessions[0].model.gpu.clone();
        // The sampled rows' parameters, recent tokens (with the one fed now) and random numbers.
        let mut sampled = Vec::new();
        for (k, (i, sampler)) in rows.iter_mut().enumerate() {
            if sampler.params.is_greedy() {
                continue;
            }
            let s = &mut self.sessions[*i];
            s.history.push(fed[k]);
            let u = sampler.next_uniform();
            self.sample[k].prepare(&gpu, &sampler.params, &s.history, u);
            s.history.pop();
            sampled.push(k);
        }
        let keys = table.iter().map(|r| r.pos + 1).max().unwrap_or(1);
        let n_head = self.sessions[0].model.config.n_head;
        let s = StepInfo {
            seqs: Seqs::Table { keys },
            ..StepInfo::new(n as u32, 0, n as u32)
        };
        gpu.queue
            .write_buffer(&self.act.tokens, 0, bytemuck::cast_slice(&fed));
        gpu.queue
            .write_buffer(&self.act.rows, 0, bytemuck::cast_slice(&table));
        gpu.queue.write_buffer(
            &self.act.step,
            0,
            bytemuck::bytes_of(&StepUniform::new(s, n_head)),
        );
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            // Every row's argmax, then the sampled rows' draws over theirs.
            let draws = sampled.iter().flat_map(|&k| &self.sample[k].dispatches);
            for d in self.forward.iter().chain(&self.greedy).chain(draws) {
                d.record(&mut pass, &s);
            }
        }
        let bytes = n as u64 * 4;
        encoder.copy_buffer_to_buffer(&self.act.tokens, 0, &self.staging, 0, bytes);
        let submission = gpu.submit(encoder.finish());
        let ids: Vec<u32> =
            bytemuck::pod_collect_to_vec(&gpu.map_staging(&self.staging, bytes, submission).await?);
        for ((r, &id), &f) in rows.iter().zip(&ids).zip(&fed) {
            self.sessions[r.0].took_batched_step(f, id);
        }
        Ok(ids)
    }
}

impl Session {
    /// Enters a batched step's row: `fed` at the next position, `id` the token it sampled.
    fn took_batched_step(&mut self, fed: u32, id: u32) {
        if let Some(m) = &mut self.mtp {
            m.pending = false;
        }
        self.history.push(fed);
        self.pos += 1;
        self.sampled = Some(id);
        // The session's own token buffer feeds its next decode step.
        self.model
            .gpu
            .queue
            .write_buffer(&self.act.tokens, 0, bytemuck::bytes_of(&id));
    }
}

#[cfg(test)]
mod tests;
