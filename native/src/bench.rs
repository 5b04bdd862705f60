//! `tandem bench`: the arguments, the table and the printing; the protocol itself (prefill and
//! decode medians over distinct prompts, each from an empty cache; the optional per-kernel profile
//! against the streaming-read ceiling) is the engine's [`tandem_engine::bench`], which the npm
//! package's `engine.bench` runs too.

use std::path::{Path, PathBuf};

use clap::Args;
use tandem_engine::bench::{run, BenchOptions, KernelGroup, PASS_REPEATS};
use tandem_engine::tokenizer::Tokenizer;
use tandem_engine::{Error, Result};

use crate::args::ModelArgs;
use crate::load;
use crate::speculate::{SpecArgs, Speculator};

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Distinct prompts (each run from an empty cache)
    #[arg(long, default_value_t = 20)]
    pub prompts: usize,
    /// Tokens per prompt
    #[arg(short = 'p', long, default_value_t = 512)]
    pub prompt_tokens: usize,
    /// Feed these prompts instead of pseudo-random ones: one a line (raw text, BOS where the
    /// model asks for it), e.g. to measure speculation on text it can predict
    #[arg(long, value_name = "FILE", conflicts_with_all = ["prompts", "prompt_tokens"])]
    pub prompt_file: Option<PathBuf>,
    /// Tokens generated per prompt
    #[arg(short = 'n', long, default_value_t = 128)]
    pub gen_tokens: usize,
    /// Also time every kernel of one pass (`--profile-tokens`) with GPU timestamps, with the
    /// bytes each reads, its GB/s and FLOP/s, against the streaming-read bandwidth measured first
    #[arg(long)]
    pub profile: bool,
    /// Tokens of the pass `--profile` times: 1 is a decode step, more a prompt chunk (at most
    /// the batch size, `--ubatch`)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub profile_tokens: u32,
    /// Also time whole verification passes of these token counts (e.g. `2,4,8`), each against
    /// a one-token pass, with GPU timestamps around each pass (median of 9)
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..))]
    pub pass_tokens: Vec<u32>,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub speculative: SpecArgs,
}

pub fn bench(args: BenchArgs) -> Result<()> {
    let opts = BenchOptions {
        prompts: args.prompts,
        prompt_tokens: args.prompt_tokens,
        prompt_ids: match &args.prompt_file {
            Some(f) => prompt_file(f, &args.model)?,
            None => Vec::new(),
        },
        gen_tokens: args.gen_tokens,
        profile: args.profile,
        profile_tokens: args.profile_tokens,
        pass_tokens: args.pass_tokens.clone(),
        draft_max: args.speculative.draft_max,
        draft_adaptive: !args.speculative.draft_fixed,
        guard: args.speculative.guard(),
    };
    let mut model_args = args.model.clone();
    let need = opts.context_needed();
    model_args.ctx = Some(model_args.ctx.unwrap_or(need).max(need));
    let mut l = load::load(&model_args)?;
    let verbose = !args.json && !args.model.quiet;
    let mut spec = Speculator::new(&args.speculative, &l)?;
    let mut drafter = spec.drafter();
    let r = pollster::block_on(run(
        &mut l.session,
        drafter.as_mut(),
        &opts,
        |i, prefill, decode| {
            if verbose {
                eprintln!(
                    "prompt {:2}: prefill {prefill:9.1} tok/s, decode {decode:7.1} tok/s",
                    i + 1
                );
            }
        },
    ))?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&r).expect("the bench result serializes")
        );
        return Ok(());
    }
    let (p, d) = (r.prefill_tokens_per_second, r.decode_tokens_per_second);
    let what = match &args.prompt_file {
        Some(_) => format!("up to {} tokens", r.prompt_tokens),
        None => format!("{} tokens", r.prompt_tokens),
    };
    println!(
        "prefill ({what}): median {:.1} tok/s (min {:.1}, max {:.1}) over {} prompts",
        p.median, p.min, p.max, r.prompts
    );
    println!(
        "decode ({} tokens):  median {:.1} tok/s (min {:.1}, max {:.1}); {} dispatches per token",
        r.gen_tokens, d.median, d.min, d.max, r.dispatches_per_token
    );
    if let Some(s) = &r.speculation {
        let mut line = format!(
            "speculative ({:?}): {} of {} drafts accepted ({:.1}%), {:.2} tokens a pass",
            spec.mode,
            s.accepted_tokens,
            s.draft_tokens,
            100.0 * s.acceptance_rate,
            s.tokens_per_pass
        );
        if s.plain_tokens > 0 {
            line += &format!(
                "; {} tokens by plain steps, which measured faster",
                s.plain_tokens
            );
        }
        println!("{line}");
    }
    for p in &r.passes {
        println!(
            "pass of {} token(s): {:.1} us GPU, {:.2}x a one-token pass (median of {PASS_REPEATS}); \
             {:.1} MB read",
            p.tokens,
            p.microseconds,
            p.of_decode_pass,
            p.bytes / 1e6
        );
    }
    if !args.pass_tokens.is_empty() && r.passes.is_empty() {
        println!("passes: not timed (the adapter has no timestamp queries)");
    }
    if let Some(c) = &r.streaming_read_ceiling {
        match c.bytes_per_second {
            Some(bps) => println!(
                "streaming-read ceiling: {:.1} GB/s (stream_read.wgsl over {} MiB, best of 6)",
                bps / 1e9,
                c.buffer_bytes >> 20
            ),
            None => println!(
                "streaming-read ceiling: not measured (the adapter has no timestamp queries)"
            ),
        }
        if r.kernels.is_empty() {
            return Ok(());
        }
        println!(
            "one pass of {} token(s), GPU time per kernel group (one compute pass each); \
             bytes read count each byte once; TFLOP/s for matrix products and attention:",
            r.profile_tokens
        );
        println!(
            "  {:28} {:>5} {:>10} {:>6} {:>10} {:>8} {:>6} {:>8}",
            "kernel", "n", "us", "%pass", "MB read", "GB/s", "%ceil", "TFLOP/s"
        );
        let row = |k: &str, g: &KernelGroup| {
            let ceil = g
                .percent_of_ceiling
                .map_or("-".into(), |p| format!("{p:.1}"));
            let tf = g
                .teraflops_per_second
                .map_or("-".into(), |t| format!("{t:.3}"));
            println!(
                "  {k:28} {:>5} {:10.1} {:6.1} {:10.2} {:8.1} {ceil:>6} {tf:>8}",
                g.dispatches,
                g.microseconds,
                g.percent_of_pass,
                g.bytes / 1e6,
                g.gigabytes_per_second,
            );
        };
        for (k, g) in &r.kernels {
            row(k, g);
        }
        row("total", &r.kernel_total());
    }
    Ok(())
}

/// `--prompt-file`'s prompts, tokenized as `tandem run` tokenizes a raw prompt: its non-empty
/// lines.
fn prompt_file(file: &Path, model: &ModelArgs) -> Result<Vec<Vec<u32>>> {
    let text =
        std::fs::read_to_string(file).map_err(|e| Error::io(file.display().to_string(), e))?;
    let (_src, gguf) = load::open_gguf(&load::model_path(&model.model)?)?;
    let tokenizer = Tokenizer::from_gguf(&gguf)?;
    let ids = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| tokenizer.encode(l, true, false))
        .collect::<Result<Vec<_>>>()?;
    if ids.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{}: no prompts in it (one a line)",
            file.display()
        )));
    }
    Ok(ids)
}
