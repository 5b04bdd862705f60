//! Perplexity by llama-perplexity's method, so figures compare with llama.cpp's.

use super::Session;
use crate::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Perplexity {
    pub value: f64,
    /// Tokens whose negative log-likelihood was averaged.
    pub scored_tokens: usize,
}

/// Rows of logits [`perplexity`] takes from one pass over a chunk of `ctx` tokens: those of its
/// second half. A session for it needs `SessionOptions::outputs` of at least this.
pub fn scored_rows(ctx: u32) -> u32 {
    ctx - ctx / 2
}

/// Cuts `tokens` into `chunks` consecutive chunks of `ctx` (as many as fit when `chunks` is
/// `None`), puts `bos` in place of each chunk's first token when given, runs each chunk from an
/// empty cache and averages the negative log-likelihood of the tokens in each chunk's second half.
pub async fn perplexity(
    session: &mut Session,
    tokens: &[u32],
    ctx: u32,
    chunks: Option<usize>,
    bos: Option<u32>,
    mut on_chunk: impl FnMut(usize, usize, f64),
) -> Result<Perplexity> {
    let ctx_len = ctx as usize;
    if ctx < 4 || ctx > session.opts.ctx {
        return Err(Error::InvalidArgument(format!(
            "perplexity context {ctx} must be between 4 and the session's {}",
            session.opts.ctx
        )));
    }
    let available = tokens.len() / ctx_len;
    let n_chunks = chunks.unwrap_or(available).min(available);
    if n_chunks == 0 {
        return Err(Error::InvalidArgument(format!(
            "the text has {} tokens, fewer than one chunk of {ctx}",
            tokens.len()
        )));
    }
    let n_out = scored_rows(ctx);
    let first = ctx_len - n_out as usize;
    if n_out > session.max_out || n_out as usize > session.opts.ubatch as usize {
        return Err(Error::InvalidArgument(format!(
            "perplexity context {ctx} needs {n_out} rows of logits at once; this session gives {} (raise the batch size or lower --ctx)",
            session.max_out.min(session.opts.ubatch)
        )));
    }
    let n_vocab = session.model.config.n_vocab as usize;
    let (mut nll, mut count) = (0.0f64, 0usize);
    for c in 0..n_chunks {
        let mut chunk = tokens[c * ctx_len..(c + 1) * ctx_len].to_vec();
        if let Some(b) = bos {
            chunk[0] = b;
        }
        session.truncate(0);
        let logits = session.eval(&chunk, n_out).await?;
        // Row r holds the logits at position first + r, predicting chunk[first + r + 1].
        for r in 0..(ctx_len - 1 - first) {
            let row = &logits[r * n_vocab..(r + 1) * n_vocab];
            let target = chunk[first + r + 1] as usize;
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
            let sum: f64 = row.iter().map(|&l| (l as f64 - max).exp()).sum();
            nll += max + sum.ln() - row[target] as f64;
            count += 1;
        }
        on_chunk(c, n_chunks, (nll / count as f64).exp());
    }
    Ok(Perplexity {
        value: (nll / count as f64).exp(),
        scored_tokens: count,
    })
}
