//! Text generation: feed a prompt (reusing the cached prefix), then sample until an end token,
//! the token budget or the context runs out, streaming text as it forms; with a drafter, several
//! tokens a target pass ([`crate::speculative`]).

use crate::model::Session;
use crate::sampling::{Sampler, SamplerParams};
use crate::speculative::{self, DraftLen, Drafter, GuardOptions, SpecDecoder, SpecStats};
use crate::tokenizer::{TextStream, Tokenizer};
use crate::Result;

#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub max_tokens: usize,
    /// Stop at the model's end-of-generation tokens (EOS, end of turn).
    pub stop_at_eog: bool,
    pub sampling: SamplerParams,
    /// Most draft tokens a speculative step proposes (with a drafter).
    pub draft_max: usize,
    /// Adapt the draft length to the acceptance (within 1..=`draft_max`), rather than always
    /// drafting `draft_max`.
    pub draft_adaptive: bool,
    /// With a drafter, speculate only while it measures faster than plain decode steps
    /// ([`speculative::SpeedGuard`]); `None`: speculate on every step.
    pub guard: Option<GuardOptions>,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_tokens: 256,
            stop_at_eog: true,
            sampling: SamplerParams::default(),
            draft_max: 4,
            draft_adaptive: true,
            guard: Some(GuardOptions::default()),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Generation {
    pub text: String,
    /// Generated ids, the end token included when one stopped the generation.
    pub tokens: Vec<u32>,
    /// Prompt tokens actually fed (the rest came from the cache).
    pub prefilled: usize,
    pub prefill_seconds: f64,
    pub decode_seconds: f64,
    pub stop: StopReason,
    /// What speculative decoding did, when it ran.
    pub speculation: Option<SpecStats>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StopReason {
    #[default]
    EndOfGeneration,
    MaxTokens,
    ContextFull,
    /// The caller asked to stop (a stop string, an abort).
    Stopped,
}

impl Generation {
    /// Decode speed over the tokens after the first (the first comes out of prefill).
    pub fn decode_tokens_per_second(&self) -> f64 {
        let n = self.tokens.len().saturating_sub(1);
        if n == 0 || self.decode_seconds <= 0.0 {
            0.0
        } else {
            n as f64 / self.decode_seconds
        }
    }
    pub fn prefill_tokens_per_second(&self) -> f64 {
        if self.prefill_seconds <= 0.0 {
            0.0
        } else {
            self.prefilled as f64 / self.prefill_seconds
        }
    }
}

/// Generates after `prompt`, calling `on_text` with each piece of text as soon as it is whole.
pub async fn generate(
    session: &mut Session,
    tokenizer: &Tokenizer,
    prompt: &[u32],
    opts: &GenerateOptions,
    mut on_text: impl FnMut(&str),
) -> Result<Generation> {
    generate_until(session, tokenizer, prompt, opts, |t| {
        on_text(t);
        true
    })
    .await
}

/// [`generate`] whose `on_text` returns whether to go on: `false` stops with
/// [`StopReason::Stopped`] (a stop string was seen, the user pressed stop).
pub async fn generate_until(
    session: &mut Session,
    tokenizer: &Tokenizer,
    prompt: &[u32],
    opts: &GenerateOptions,
    on_text: impl FnMut(&str) -> bool,
) -> Result<Generation> {
    generate_with(session, None, tokenizer, prompt, opts, on_text).await
}

/// [`generate_until`] with a drafter: each step drafts up to `opts.draft_max` tokens and the
/// target verifies them in one pass; greedy tokens are the same as without the drafter, sampled
/// ones have the same distribution.
pub async fn generate_with(
    session: &mut Session,
    mut drafter: Option<&mut Drafter<'_>>,
    tokenizer: &Tokenizer,
    prompt: &[u32],
    opts: &GenerateOptions,
    mut on_text: impl FnMut(&str) -> bool,
) -> Result<Generation> {
    let mut g = Generator::start(session, drafter.as_deref_mut(), prompt, opts).await?;
    while g
        .step(session, drafter.as_deref_mut(), tokenizer, &mut on_text)
        .await?
    {}
    Ok(g.finish(&mut on_text))
}

/// A generation taken one step at a time, so that a caller can interleave several sessions'
/// generations on one GPU (`tandem serve`'s slots): [`Generator::start`] feeds the prompt,
/// each [`Generator::step`] hands out the tokens the last pass made and runs the next pass,
/// [`Generator::finish`] flushes the text held back. [`generate_with`] is the loop over it.
/// A step is also [`Generator::hand_out`] then [`Generator::advance`], or, for a generation
/// without a drafter, `hand_out` then [`Generator::take`] of the token a
/// [`SessionSet::decode`](crate::model::SessionSet::decode) made for it (with
/// [`Generator::sampler`]) along with other sessions'.
pub struct Generator {
    opts: GenerateOptions,
    out: Generation,
    stream: TextStream,
    sampler: Sampler,
    /// With a drafter.
    spec: Option<SpecDecoder>,
    /// Tokens the last pass made, not handed out yet.
    batch: Vec<u32>,
    /// When decoding began.
    t1: f64,
    done: bool,
}

impl Generator {
    /// Feeds `prompt` (reusing the session's cached prefix) and samples the first token. The
    /// same `drafter` (or none) must be given to every step.
    pub async fn start(
        session: &mut Session,
        drafter: Option<&mut Drafter<'_>>,
        prompt: &[u32],
        opts: &GenerateOptions,
    ) -> Result<Generator> {
        if let Some(d) = &drafter {
            d.check(session)?;
        }
        let mut out = Generation::default();
        let mut sampler = Sampler::new(opts.sampling.clone());
        let t0 = crate::platform::now_seconds();
        let (first, fed) =
            speculative::prefill(session, drafter.as_deref(), prompt, &mut sampler).await?;
        out.prefilled = fed;
        out.prefill_seconds = crate::platform::now_seconds() - t0;
        Ok(Generator {
            opts: opts.clone(),
            out,
            stream: TextStream::new(),
            sampler,
            spec: drafter.is_some().then(|| {
                SpecDecoder::new(
                    DraftLen::new(opts.draft_max, opts.draft_adaptive),
                    opts.guard,
                )
            }),
            batch: vec![first],
            t1: crate::platform::now_seconds(),
            done: false,
        })
    }

    /// Hands the tokens the last pass made to `on_text` (as text, once whole) and, unless one of
    /// them ended the generation, runs the next pass; returns whether there is more to come.
    pub async fn step(
        &mut self,
        session: &mut Session,
        drafter: Option<&mut Drafter<'_>>,
        tokenizer: &Tokenizer,
        on_text: impl FnMut(&str) -> bool,
    ) -> Result<bool> {
        if !self.hand_out(session, tokenizer, on_text) {
            return Ok(false);
        }
        self.advance(session, drafter).await?;
        Ok(true)
    }

    /// Hands the tokens the last pass made to `on_text` (as text, once whole); returns whether
    /// the generation goes on (then a pass must make its next tokens: [`Generator::advance`]
    /// or [`Generator::take`]).
    pub fn hand_out(
        &mut self,
        session: &Session,
        tokenizer: &Tokenizer,
        mut on_text: impl FnMut(&str) -> bool,
    ) -> bool {
        if self.done {
            return false;
        }
        let (opts, out) = (&self.opts, &mut self.out);
        let n = self.batch.len();
        for (i, &id) in self.batch.iter().enumerate() {
            out.tokens.push(id);
            let stop = if opts.stop_at_eog && tokenizer.is_end_of_generation(id) {
                Some(StopReason::EndOfGeneration)
            } else {
                let piece = self.stream.push(tokenizer, id);
                if !piece.is_empty() {
                    out.text.push_str(&piece);
                }
                if !piece.is_empty() && !on_text(&piece) {
                    Some(StopReason::Stopped)
                } else if out.tokens.len() >= opts.max_tokens {
                    Some(StopReason::MaxTokens)
                // The positions fed before this token, as decoding one at a time would have them.
                } else if session.pos() - (n - 1 - i) as u32 >= session.opts.ctx {
                    Some(StopReason::ContextFull)
                } else {
                    None
                }
            };
            if let Some(stop) = stop {
                out.stop = stop;
                self.done = true;
                return false;
            }
        }
        true
    }

    /// Whether the next token can come from a batched step
    /// ([`SessionSet::decode`](crate::model::SessionSet::decode), with [`Generator::sampler`]):
    /// no drafter (speculation verifies its own drafts).
    pub fn batchable(&self) -> bool {
        self.spec.is_none()
    }

    /// The sampler a batched step takes this generation's next token with.
    pub fn sampler(&mut self) -> &mut Sampler {
        &mut self.sampler
    }

    /// Takes the next token from a batched step instead of running a pass.
    pub fn take(&mut self, id: u32) {
        self.batch = vec![id];
    }

    /// Runs the pass that makes the next tokens, after [`Generator::hand_out`] said to go on.
    pub async fn advance(
        &mut self,
        session: &mut Session,
        drafter: Option<&mut Drafter<'_>>,
    ) -> Result<()> {
        let last = self.batch[self.batch.len() - 1];
        let left = self.opts.max_tokens - self.out.tokens.len();
        let sampler = &mut self.sampler;
        self.batch = match (drafter, &mut self.spec) {
            (Some(d), Some(spec)) => spec.next(session, d, last, left, sampler).await?,
            _ if left == 1 => vec![session.decode_last(sampler).await?],
            _ => vec![session.decode(sampler).await?],
        };
        Ok(())
    }

    /// Tokens handed out so far.
    pub fn tokens(&self) -> &[u32] {
        &self.out.tokens
    }

    /// Ends the generation (where it stopped, or early: the caller gave up), handing the text
    /// still held back to `on_text` unless `on_text` stopped it.
    pub fn finish(mut self, mut on_text: impl FnMut(&str) -> bool) -> Generation {
        if !self.done {
            self.out.stop = StopReason::Stopped;
        }
        self.out.speculation = self.spec.map(|s| s.stats);
        let rest = self.stream.finish();
        if !rest.is_empty() && self.out.stop != StopReason::Stopped {
            on_text(&rest);
            self.out.text.push_str(&rest);
        }
        self.out.decode_seconds = crate::platform::now_seconds() - self.t1;
        self.out
    }
}
