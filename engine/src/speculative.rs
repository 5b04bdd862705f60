//! Speculative decoding: a drafter proposes the next tokens, the target checks them all in one
//! batched pass and keeps the longest prefix it agrees with, plus its own next token, so greedy
//! output is the same as without drafting while a pass yields more tokens; with sampling, the
//! speculative-sampling rule keeps the output's distribution the target's
//! ([`accept_sampled`]).

use crate::model::{Config, Session};
use crate::sampling::{candidates, draw, Sampler};
use crate::{Error, Result};

mod guard;
pub use guard::{GuardOptions, Mode, SpeedGuard};

/// Where draft tokens come from.
pub enum Drafter<'a> {
    /// A smaller model with the same vocabulary, decoding greedily in its own session.
    Model(&'a mut Session),
    /// The target's own MTP layer, chained on the GPU ([`Session::mtp_round`]).
    Mtp,
}

impl Drafter<'_> {
    /// Checks that the drafter can draft for `target`: the same vocabulary, and a context at
    /// least as long (it holds the same tokens).
    pub fn check(&self, target: &Session) -> Result<()> {
        match self {
            Drafter::Model(d) => {
                check_draft_vocab(&d.model.config, &target.model.config)?;
                if d.opts.ctx < target.opts.ctx {
                    return Err(Error::InvalidArgument(format!(
                        "the draft session's context ({}) is shorter than the model's ({})",
                        d.opts.ctx, target.opts.ctx
                    )));
                }
                Ok(())
            }
            Drafter::Mtp if !target.has_mtp() => Err(Error::InvalidArgument(
                "this model has no MTP layer: speculate with a draft model (--draft) or turn \
                 speculation off"
                    .into(),
            )),
            Drafter::Mtp => Ok(()),
        }
    }
}

/// Checks that a draft model has the target's vocabulary (from their headers, before loading).
pub fn check_draft_vocab(draft: &Config, target: &Config) -> Result<()> {
    if draft.n_vocab != target.n_vocab || draft.vocab_hash != target.vocab_hash {
        return Err(Error::InvalidArgument(format!(
            "the draft model's vocabulary ({} tokens) is not the model's ({} tokens): \
             pick a draft model with the same tokenizer",
            draft.n_vocab, target.n_vocab
        )));
    }
    Ok(())
}

/// What speculation did over a generation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecStats {
    /// Tokens the drafter proposed.
    pub drafted: usize,
    /// Of them, the tokens the target agreed with.
    pub accepted: usize,
    /// Verification passes of the target.
    pub passes: usize,
    /// Tokens made by plain decode steps, where the [`SpeedGuard`] found them faster.
    pub plain: usize,
}

impl SpecStats {
    /// Adds another generation's figures.
    pub fn add(&mut self, o: &SpecStats) {
        self.drafted += o.drafted;
        self.accepted += o.accepted;
        self.passes += o.passes;
        self.plain += o.plain;
    }

    /// Share of drafted tokens accepted (0 when nothing was drafted).
    pub fn acceptance_rate(&self) -> f64 {
        if self.drafted == 0 {
            0.0
        } else {
            self.accepted as f64 / self.drafted as f64
        }
    }

    /// Tokens each verification pass yielded: the accepted drafts and the target's own token.
    pub fn tokens_per_pass(&self) -> f64 {
        if self.passes == 0 {
            0.0
        } else {
            (self.accepted + self.passes) as f64 / self.passes as f64
        }
    }
}

/// The draft length after a step that drafted `n` of `len` and had `k` accepted (Hugging Face's
/// heuristic schedule for assisted generation): all accepted, two more; else one fewer, at
/// least 1. A step cut short by the budget or the context (`n < len`) with all accepted leaves
/// it.
pub fn next_draft_len(len: usize, n: usize, k: usize) -> usize {
    match (k == n, n < len) {
        (true, true) => len,
        (true, false) => len + 2,
        (false, _) => len.saturating_sub(1).max(1),
    }
}

/// How many drafts agree with the target: `targets[i]` is the target's token after the last
/// accepted token and `drafts[..i]`, so draft `i` stands while it equals `targets[i]`.
pub fn accepted_prefix(drafts: &[u32], targets: &[u32]) -> usize {
    drafts
        .iter()
        .zip(targets)
        .take_while(|(d, t)| d == t)
        .count()
}

/// Speculative sampling for drafts a greedy drafter made (its distribution one-hot on each
/// draft): draft `i` stands with the target's probability of it, `p_i(d_i)` (the sampler's
/// chain on row `i` of `rows`, [`candidates`]); the first that does not is replaced by a draw
/// from `p_i` without `d_i`, renormalised. That is Leviathan et al.'s rule (accept with
/// `min(1, p/q)`, else draw from `max(p - q, 0)`) for a one-hot `q`, so each token has the
/// target's distribution. All standing, the next token is drawn from the last row. `rows`: the
/// target's logits after `history`'s last token and after each draft. Returns the drafts
/// accepted and the next token.
pub fn accept_sampled(
    rows: &[f32],
    drafts: &[u32],
    history: &[u32],
    sampler: &mut Sampler,
) -> (usize, u32) {
    let n_vocab = rows.len() / (drafts.len() + 1);
    let mut history = history.to_vec();
    for (i, &d) in drafts.iter().enumerate() {
        let c = candidates(&rows[i * n_vocab..][..n_vocab], &history, &sampler.params);
        let total: f32 = c.iter().map(|x| x.1).sum();
        let p = c.iter().find(|x| x.0 == d).map_or(0.0, |x| x.1 / total);
        if sampler.next_uniform() < p {
            history.push(d);
            continue;
        }
        // Not empty: p < 1, so some other token has weight.
        let rest: Vec<(u32, f32)> = c.into_iter().filter(|x| x.0 != d).collect();
        return (i, draw(&rest, sampler.next_uniform()));
    }
    let n = drafts.len();
    let c = candidates(&rows[n * n_vocab..], &history, &sampler.params);
    (n, draw(&c, sampler.next_uniform()))
}

/// The draft length a generation carries from step to step.
#[derive(Clone, Copy, Debug)]
pub struct DraftLen {
    /// Drafts the next step proposes at most.
    pub n: usize,
    /// The cap on `n`.
    pub max: usize,
    /// `n` follows the acceptance ([`next_draft_len`]) rather than staying at `max`.
    pub adaptive: bool,
}

impl DraftLen {
    /// Starting at `max`.
    pub fn new(max: usize, adaptive: bool) -> DraftLen {
        DraftLen {
            n: max,
            max,
            adaptive,
        }
    }
}

/// Feeds `prompt` (reusing the target's cached prefix) and samples the first token; with the
/// MTP drafter the MTP layer's cache is filled beside the target's. Returns the token and the
/// prompt tokens actually fed.
pub async fn prefill(
    target: &mut Session,
    drafter: Option<&Drafter<'_>>,
    prompt: &[u32],
    sampler: &mut Sampler,
) -> Result<(u32, usize)> {
    match drafter {
        Some(Drafter::Mtp) => target.mtp_prefill(prompt, sampler).await,
        _ => {
            let fresh = target.reuse_prefix(prompt);
            let id = target.prefill(fresh, sampler).await?;
            Ok((id, fresh.len()))
        }
    }
}

/// The speculative side of one generation: the draft length it carries from step to step, what
/// the drafts did, and, with a [`SpeedGuard`], whether the next tokens come from a speculative
/// step or from plain decode steps (and the drafter's catching up when speculation resumes).
/// The guard lives on the target's session, so the next request goes on from what this one
/// measured. [`crate::generate::Generator`] and the benchmark decode through it.
pub struct SpecDecoder {
    len: DraftLen,
    /// What the drafts (and the plain steps) did so far.
    pub stats: SpecStats,
    guard: Option<GuardOptions>,
    /// The drafter must catch up with plain steps before the next round ([`resume`]).
    resume: bool,
    /// When the last pass ended (the guard times from pass to pass, the host's work between
    /// them included).
    mark: f64,
}

impl SpecDecoder {
    /// Starting after the prompt's pass: drafts of up to `len.max`, speculating on every step
    /// unless `guard`.
    pub fn new(len: DraftLen, guard: Option<GuardOptions>) -> SpecDecoder {
        SpecDecoder {
            len,
            stats: SpecStats::default(),
            guard,
            resume: false,
            mark: crate::platform::now_seconds(),
        }
    }

    /// The next tokens after `last` (the target's latest token, not yet fed), at most `left`
    /// (at least 1): a speculative step with at most the carried draft length, fewer where the
    /// context or one verify pass has no room for them, or a plain decode step where the guard
    /// found those faster. The last token returned is not yet fed.
    pub async fn next(
        &mut self,
        target: &mut Session,
        drafter: &mut Drafter<'_>,
        last: u32,
        left: usize,
        sampler: &mut Sampler,
    ) -> Result<Vec<u32>> {
        // The session's guard, unless it was made with other options (taken for the step, put
        // back after it).
        let mut guard = self.guard.map(|opts| match target.speed_guard.take() {
            Some(g) if g.options() == opts => g,
            _ => SpeedGuard::new(opts),
        });
        let run = self
            .run(target, drafter, guard.as_ref(), last, left, sampler)
            .await;
        let now = crate::platform::now_seconds();
        let seconds = now - std::mem::replace(&mut self.mark, now);
        if let (Ok((new, true)), Some(g)) = (&run, &mut guard) {
            match g.record(new.len(), seconds) {
                Some(Mode::Plain) => target.set_next_token(new[new.len() - 1]),
                Some(Mode::Speculate) => self.resume = true,
                None => {}
            }
        }
        if guard.is_some() {
            target.speed_guard = guard;
        }
        run.map(|(new, _)| new)
    }

    /// [`SpecDecoder::next`]'s pass(es), in the mode `guard` says, and whether the guard times
    /// them (not the drafter's catching up).
    async fn run(
        &mut self,
        target: &mut Session,
        drafter: &mut Drafter<'_>,
        guard: Option<&SpeedGuard>,
        last: u32,
        left: usize,
        sampler: &mut Sampler,
    ) -> Result<(Vec<u32>, bool)> {
        let plain = guard.map(SpeedGuard::mode) == Some(Mode::Plain);
        let mut timed = true;
        let new = if plain {
            self.stats.plain += 1;
            if let Drafter::Mtp = drafter {
                target.keep_mtp_pairs();
            }
            if left == 1 {
                vec![target.decode_last(sampler).await?]
            } else {
                vec![target.decode(sampler).await?]
            }
        } else {
            if std::mem::take(&mut self.resume) {
                match resume(target, drafter, last, sampler).await? {
                    Some(next) => {
                        // A pass of its own, left out of the guard's timing.
                        self.stats.plain += 1;
                        return Ok((vec![next], false));
                    }
                    // The drafter catches up within this step: left out too.
                    None => timed = false,
                }
            }
            let room = (target.opts.ctx - target.pos()).min(target.max_verify()) as usize;
            let n = self.len.n.min(room.saturating_sub(1)).min(left - 1);
            let accepted = self.stats.accepted;
            let new = step(target, drafter, last, n, sampler, &mut self.stats).await?;
            if self.len.adaptive {
                let k = self.stats.accepted - accepted;
                self.len.n = next_draft_len(self.len.n, n, k).min(self.len.max);
            }
            new
        };
        Ok((new, timed))
    }
}

/// One speculative step after `last` (the target's latest token, not yet fed): drafts up to `n`
/// tokens, verifies `[last, drafts..]` in one target pass (greedy: argmax on the GPU; sampling:
/// [`accept_sampled`] on the rows' logits), rolls the target's KV cache back to the accepted
/// prefix and returns the new tokens (the accepted drafts, then the target's next token, which
/// is not yet fed either).
pub async fn step(
    target: &mut Session,
    drafter: &mut Drafter<'_>,
    last: u32,
    n: usize,
    sampler: &mut Sampler,
    stats: &mut SpecStats,
) -> Result<Vec<u32>> {
    let (drafts, k, next) = match drafter {
        Drafter::Model(d) => {
            let pos0 = target.pos();
            let mut fed = target.history().to_vec();
            fed.push(last);
            let drafts = draft_greedy(d, &fed, n).await?;
            let history = std::mem::replace(&mut fed, vec![last]);
            fed.extend_from_slice(&drafts);
            let (k, next) = if sampler.params.is_greedy() {
                let targets = target.verify(&fed).await?;
                let k = accepted_prefix(&drafts, &targets);
                (k, targets[k])
            } else {
                let rows = target.eval(&fed, fed.len() as u32).await?;
                accept_sampled(&rows, &drafts, &history, sampler)
            };
            target.truncate(pos0 + k as u32 + 1);
            (drafts, k, next)
        }
        // Drafting, verification and the roll-back on the GPU, one readback.
        Drafter::Mtp => target.mtp_round(last, n, sampler).await?,
    };
    stats.drafted += drafts.len();
    stats.accepted += k;
    stats.passes += 1;
    let mut out = drafts[..k].to_vec();
    out.push(next);
    Ok(out)
}

/// After plain decode steps of a guarded generation, brings the drafter back in step with the
/// target before the next speculative round, after `last` (the target's latest token, not yet
/// fed). Where the plain steps kept their hidden states ([`Session::keep_mtp_pairs`]) the next
/// round's first draft step makes their MTP pairs, as a draft model catches up in its next step
/// by itself (`None`); else the MTP layer's pairs are made by feeding those positions to the
/// target again in one pass, which also samples the token after `last` (returned).
pub(crate) async fn resume(
    target: &mut Session,
    drafter: &Drafter<'_>,
    last: u32,
    sampler: &mut Sampler,
) -> Result<Option<u32>> {
    match drafter {
        Drafter::Mtp if target.mtp_pairs_pending() => Ok(None),
        Drafter::Mtp => {
            let seq = [target.history(), &[last]].concat();
            Ok(Some(target.mtp_prefill(&seq, sampler).await?.0))
        }
        Drafter::Model(_) => Ok(None),
    }
}

/// `n` greedy tokens of the draft session after `seq`, reusing what its cache already holds of
/// it.
async fn draft_greedy(d: &mut Session, seq: &[u32], n: usize) -> Result<Vec<u32>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let fresh = d.reuse_prefix(seq).to_vec();
    let mut greedy = Sampler::greedy();
    let mut out = vec![d.prefill(&fresh, &mut greedy).await?];
    while out.len() < n {
        out.push(d.decode_last(&mut greedy).await?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
