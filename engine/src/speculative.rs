//! Speculative decoding: a drafter proposes the next tokens, the target checks them all in one
//! batched pass ([`Session::verify`]) and keeps the longest prefix it agrees with, plus its own
//! next token, so greedy output is the same as without drafting while a pass yields more tokens.

use crate::model::{Config, Session};
use crate::sampling::Sampler;
use crate::{Error, Result};

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
}

impl SpecStats {
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

/// How many drafts agree with the target: `targets[i]` is the target's token after the last
/// accepted token and `drafts[..i]`, so draft `i` stands while it equals `targets[i]`.
pub fn accepted_prefix(drafts: &[u32], targets: &[u32]) -> usize {
    drafts
        .iter()
        .zip(targets)
        .take_while(|(d, t)| d == t)
        .count()
}

/// One speculative step after `last` (the target's latest token, not yet fed): drafts up to `n`
/// tokens, verifies `[last, drafts..]` in one target pass, rolls the target's KV cache back to
/// the accepted prefix and returns the new tokens (the accepted drafts, then the target's next
/// token, which is not yet fed either). Greedy only.
pub async fn step(
    target: &mut Session,
    drafter: &mut Drafter<'_>,
    last: u32,
    n: usize,
    stats: &mut SpecStats,
) -> Result<Vec<u32>> {
    let (drafts, targets) = match drafter {
        Drafter::Model(d) => {
            let pos0 = target.pos();
            let drafts = draft_greedy(d, target.history(), last, n).await?;
            let mut fed = Vec::with_capacity(drafts.len() + 1);
            fed.push(last);
            fed.extend_from_slice(&drafts);
            let targets = target.verify(&fed).await?;
            let k = accepted_prefix(&drafts, &targets);
            target.truncate(pos0 + k as u32 + 1);
            (drafts, targets)
        }
        // Drafting, verification and the roll-back in one submit.
        Drafter::Mtp => target.mtp_round(last, n).await?,
    };
    let k = accepted_prefix(&drafts, &targets);
    stats.drafted += drafts.len();
    stats.accepted += k;
    stats.passes += 1;
    let mut out = drafts[..k].to_vec();
    out.push(targets[k]);
    Ok(out)
}

/// `n` greedy tokens of the draft session after `history` and `last`, reusing what its cache
/// already holds of them.
async fn draft_greedy(d: &mut Session, history: &[u32], last: u32, n: usize) -> Result<Vec<u32>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut seq = Vec::with_capacity(history.len() + 1);
    seq.extend_from_slice(history);
    seq.push(last);
    let fresh = d.reuse_prefix(&seq).to_vec();
    let mut greedy = Sampler::greedy();
    let mut out = vec![d.prefill(&fresh, &mut greedy).await?];
    while out.len() < n {
        out.push(d.decode_last(&mut greedy).await?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
