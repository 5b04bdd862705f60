//! Per-kernel GPU time of one pass, from timestamp queries, with the bytes each kernel reads and
//! the FLOPs it does (its [`Dispatch::cost`]): the first thing to read before changing a kernel
//! (shared/MEASURE.md).

use crate::kernels::{Dispatch, Seqs, StepInfo, StepUniform};
use crate::{Error, Result};

use super::Session;

/// One dispatch of a profiled pass.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTime {
    /// The dispatch's label (the weight's name for a matrix product).
    pub label: String,
    /// GPU time, from the timestamps around its compute pass.
    pub ns: f64,
    /// Bytes it reads from memory in this pass (weights, activations, KV cache; each once).
    pub bytes: f64,
    /// Its floating-point operations (0 where it is not a matrix product or attention).
    pub flops: f64,
}

impl Session {
    /// Times each dispatch of one pass of `n_tokens` at the current position with GPU timestamps
    /// (one compute pass per dispatch, so the total exceeds a normal pass's time by the pass
    /// overheads). Returns each dispatch's label, time, bytes read and FLOPs, in dispatch order;
    /// the cache is left unchanged.
    pub async fn profile(&mut self, n_tokens: u32) -> Result<Vec<KernelTime>> {
        let (s, ns) = self.timed_pass(n_tokens, 1, true).await?;
        Ok(self
            .pass_dispatches(&s)
            .zip(ns)
            .map(|(d, ns)| {
                let cost = (d.cost)(&s);
                KernelTime {
                    label: d.label.clone(),
                    ns,
                    bytes: cost.bytes,
                    flops: cost.flops,
                }
            })
            .collect())
    }

    /// One verification pass of `n_tokens` at the current position (logits and the argmax for
    /// every token; for 1 token, a decode step's pass) recorded as decoding records it, one
    /// compute pass, timed whole with GPU timestamps: what a pass costs, without the profile's
    /// per-dispatch overheads. Returns it as one [`KernelTime`] labelled `pass` (bytes and FLOPs
    /// summed over its dispatches); the cache is left unchanged.
    pub async fn pass_time(&mut self, n_tokens: u32) -> Result<KernelTime> {
        if n_tokens == 0 || n_tokens > self.max_verify() {
            return Err(Error::InvalidArgument(format!(
                "a timed pass takes 1..={} tokens, not {n_tokens}",
                self.max_verify()
            )));
        }
        let (s, ns) = self.timed_pass(n_tokens, n_tokens, false).await?;
        let (mut bytes, mut flops) = (0.0, 0.0);
        for d in self.pass_dispatches(&s) {
            let cost = (d.cost)(&s);
            bytes += cost.bytes;
            flops += cost.flops;
        }
        Ok(KernelTime {
            label: "pass".into(),
            ns: ns[0],
            bytes,
            flops,
        })
    }

    /// The dispatches of a pass of shape `s`: the forward pass and the greedy argmax of its
    /// output rows (the decode step's for one, the verification's for more).
    fn pass_dispatches<'a>(&'a self, s: &'a StepInfo) -> impl Iterator<Item = &'a Dispatch> {
        let argmax = if s.n_out == 1 {
            &self.greedy
        } else {
            &self.verify_greedy
        };
        self.forward
            .iter()
            .chain(argmax)
            .filter(move |d| (d.grid)(s).is_some())
    }

    /// Runs one pass of `n_tokens` (logits for the last `n_out`) at the current position with
    /// timestamps around each dispatch (`per_dispatch`: a compute pass each) or around the
    /// whole pass (one compute pass), and returns its shape and the timed spans' nanoseconds.
    async fn timed_pass(
        &mut self,
        n_tokens: u32,
        n_out: u32,
        per_dispatch: bool,
    ) -> Result<(StepInfo, Vec<f64>)> {
        self.discard_ahead();
        let gpu = self.model.gpu.clone();
        if !gpu.features.timestamps {
            return Err(Error::Gpu("this adapter has no timestamp queries".into()));
        }
        self.check_tokens(&vec![0; n_tokens as usize])?;
        let s = StepInfo {
            seqs: Seqs::One(self.seq),
            ..StepInfo::new(n_tokens, self.pos, n_out)
        };
        let active: Vec<&Dispatch> = self.pass_dispatches(&s).collect();
        // Dispatches a timed span holds: one (a compute pass each) or all (one compute pass).
        let span = if per_dispatch { 1 } else { active.len() };
        let count = 2 * active.len().div_ceil(span) as u32;
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
        gpu.queue.write_buffer(
            &self.act.step,
            0,
            bytemuck::bytes_of(&StepUniform::new(s, self.model.config.n_head)),
        );
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        for (i, group) in active.chunks(span).enumerate() {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &queries,
                    beginning_of_pass_write_index: Some(2 * i as u32),
                    end_of_pass_write_index: Some(2 * i as u32 + 1),
                }),
            });
            for d in group {
                d.record(&mut pass, &s);
            }
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
        let ns = ticks
            .chunks(2)
            .map(|t| t[1].saturating_sub(t[0]) as f64 * period)
            .collect();
        Ok((s, ns))
    }
}
