//! `tandem perplexity`: llama-perplexity's measure on a text file.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;
use tandem_engine::model::{perplexity as measure_perplexity, scored_rows};
use tandem_engine::{Error, Result};

use crate::args::ModelArgs;
use crate::load;

/// Tokens per chunk when `-c` is not given (llama-perplexity's published figures use `-c 512`).
pub const DEFAULT_CHUNK: u32 = 512;

#[derive(Args)]
pub struct PerplexityArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The text file to score
    #[arg(short, long)]
    pub file: PathBuf,
    /// Score only the first K chunks
    #[arg(long)]
    pub chunks: Option<usize>,
    /// Print one JSON object with perplexity and scored_tokens
    #[arg(long)]
    pub json: bool,
}

pub fn perplexity(args: PerplexityArgs) -> Result<()> {
    // As in llama-perplexity, -c is the chunk: the context holds one chunk, scored in one pass.
    let chunk = args.model.ctx.unwrap_or(DEFAULT_CHUNK);
    let mut model_args = args.model.clone();
    model_args.ubatch = model_args.ubatch.max(chunk);
    model_args.outputs = model_args.outputs.max(scored_rows(chunk));
    model_args.ctx = Some(chunk);
    let mut l = load::load(&model_args)?;
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| Error::io(args.file.display().to_string(), e))?;
    let tokens = l.tokenizer.encode(&text, false, false)?;
    let bos = if l.tokenizer.add_bos() {
        l.tokenizer.bos()
    } else {
        None
    };
    let quiet = args.model.quiet || args.json;
    let p = pollster::block_on(measure_perplexity(
        &mut l.session,
        &tokens,
        chunk,
        args.chunks,
        bos,
        |c, n, running| {
            if !quiet {
                eprintln!("chunk {}/{n}: running perplexity {running:.4}", c + 1);
            }
        },
    ))?;
    if args.json {
        println!(
            "{}",
            json!({"perplexity": p.value, "scored_tokens": p.scored_tokens, "chunk_ctx": chunk})
        );
    } else {
        println!("perplexity: {:.4}", p.value);
        eprintln!("({} tokens scored)", p.scored_tokens);
    }
    Ok(())
}
