//! Text generation: feed a prompt (reusing the cached prefix), then sample until an end token,
//! the token budget or the context runs out, streaming text as it forms.

use crate::model::Session;
use crate::sampling::{Sampler, SamplerParams};
use crate::tokenizer::{TextStream, Tokenizer};
use crate::Result;

#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub max_tokens: usize,
    /// Stop at the model's end-of-generation tokens (EOS, end of turn).
    pub stop_at_eog: bool,
    pub sampling: SamplerParams,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_tokens: 256,
            stop_at_eog: true,
            sampling: SamplerParams::default(),
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
    mut on_text: impl FnMut(&str) -> bool,
) -> Result<Generation> {
    let mut out = Generation::default();
    let fresh = session.reuse_prefix(prompt);
    out.prefilled = fresh.len();
    let mut stream = TextStream::new();
    let mut sampler = Sampler::new(opts.sampling.clone());
    let t0 = crate::platform::now_seconds();
    let mut id = session.prefill(fresh, &mut sampler).await?;
    out.prefill_seconds = crate::platform::now_seconds() - t0;
    let t1 = crate::platform::now_seconds();
    loop {
        out.tokens.push(id);
        if opts.stop_at_eog && tokenizer.is_end_of_generation(id) {
            out.stop = StopReason::EndOfGeneration;
            break;
        }
        let piece = stream.push(tokenizer, id);
        if !piece.is_empty() {
            out.text.push_str(&piece);
            if !on_text(&piece) {
                out.stop = StopReason::Stopped;
                break;
            }
        }
        if out.tokens.len() >= opts.max_tokens {
            out.stop = StopReason::MaxTokens;
            break;
        }
        if session.pos() >= session.opts.ctx {
            out.stop = StopReason::ContextFull;
            break;
        }
        id = if out.tokens.len() + 1 >= opts.max_tokens {
            session.decode_last(&mut sampler).await?
        } else {
            session.decode(&mut sampler).await?
        };
    }
    let rest = stream.finish();
    if !rest.is_empty() && out.stop != StopReason::Stopped {
        on_text(&rest);
        out.text.push_str(&rest);
    }
    out.decode_seconds = crate::platform::now_seconds() - t1;
    Ok(out)
}
