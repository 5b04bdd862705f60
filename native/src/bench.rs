//! `tandem bench`: prefill and decode speed as medians over distinct prompts, each a fresh
//! request (empty KV cache), per MEASURE.md; optionally the per-kernel split of one token.

use std::collections::BTreeMap;

use clap::Args;
use serde_json::json;
use tandem_engine::platform::now_seconds;
use tandem_engine::sampling::Sampler;
use tandem_engine::Result;

use crate::args::ModelArgs;
use crate::load;

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
    /// Tokens generated per prompt
    #[arg(short = 'n', long, default_value_t = 128)]
    pub gen_tokens: usize,
    /// Also time every kernel of one decode step with GPU timestamps
    #[arg(long)]
    pub profile: bool,
    /// Tokens of the pass `--profile` times: 1 is a decode step, more a prompt chunk (at most
    /// the batch size, `--ubatch`)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub profile_tokens: u32,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
}

/// Median, min and max.
fn summary(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (median, v[0], v[n - 1])
}

/// A deterministic pseudo-random prompt: distinct per index, ids drawn from the vocabulary.
fn prompt(index: usize, len: usize, n_vocab: u32) -> Vec<u32> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ (index as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n_vocab as u64) as u32
        })
        .collect()
}

pub fn bench(args: BenchArgs) -> Result<()> {
    let mut model_args = args.model.clone();
    let need = (args.prompt_tokens + args.gen_tokens) as u32 + args.profile_tokens;
    model_args.ctx = Some(model_args.ctx.unwrap_or(need).max(need));
    let mut l = load::load(&model_args)?;
    let n_vocab = l.session.model.config.n_vocab;
    let s = &mut l.session;
    // Warm up: compile every pipeline and touch every buffer once.
    s.truncate(0);
    pollster::block_on(s.prefill(
        &prompt(usize::MAX, args.prompt_tokens.max(2), n_vocab),
        &mut Sampler::greedy(),
    ))?;
    pollster::block_on(s.decode(&mut Sampler::greedy()))?;
    let (mut prefill, mut decode) = (Vec::new(), Vec::new());
    for i in 0..args.prompts {
        s.truncate(0);
        let p = prompt(i, args.prompt_tokens, n_vocab);
        let t0 = now_seconds();
        pollster::block_on(s.prefill(&p, &mut Sampler::greedy()))?;
        let t1 = now_seconds();
        for _ in 1..args.gen_tokens {
            pollster::block_on(s.decode(&mut Sampler::greedy()))?;
        }
        let t2 = now_seconds();
        prefill.push(args.prompt_tokens as f64 / (t1 - t0));
        decode.push((args.gen_tokens - 1) as f64 / (t2 - t1));
        if !args.json && !args.model.quiet {
            eprintln!(
                "prompt {:2}: prefill {:9.1} tok/s, decode {:7.1} tok/s",
                i + 1,
                prefill[i],
                decode[i]
            );
        }
    }
    let (pm, pmin, pmax) = summary(prefill);
    let (dm, dmin, dmax) = summary(decode);
    let dispatches = s.dispatches_per_token();
    let mut kernels = BTreeMap::new();
    let mut kernel_total = 0.0;
    if args.profile {
        // One pass at the end of the last prompt's context.
        let prof = pollster::block_on(s.profile(args.profile_tokens))?;
        for (label, ns) in prof {
            // Group per-layer tensors: blk.7.ffn_up.weight -> ffn_up.weight.
            let key: Vec<&str> = label
                .split('.')
                .filter(|p| *p != "blk" && p.parse::<u32>().is_err())
                .collect();
            let e: &mut (f64, usize) = kernels.entry(key.join(".")).or_default();
            e.0 += ns / 1e3;
            e.1 += 1;
            kernel_total += ns / 1e3;
        }
    }
    if args.json {
        let k: BTreeMap<_, _> = kernels
            .iter()
            .map(|(k, (us, n))| (k.clone(), json!({"microseconds": us, "dispatches": n})))
            .collect();
        println!(
            "{}",
            json!({
                "adapter": s.model.gpu.describe(),
                "prompts": args.prompts, "prompt_tokens": args.prompt_tokens, "gen_tokens": args.gen_tokens,
                "profile_tokens": args.profile_tokens,
                "prefill_tokens_per_second": {"median": pm, "min": pmin, "max": pmax},
                "decode_tokens_per_second": {"median": dm, "min": dmin, "max": dmax},
                "dispatches_per_token": dispatches,
                "kernels": k,
            })
        );
    } else {
        println!(
            "prefill ({} tokens): median {pm:.1} tok/s (min {pmin:.1}, max {pmax:.1}) over {} prompts",
            args.prompt_tokens, args.prompts
        );
        println!(
            "decode ({} tokens):  median {dm:.1} tok/s (min {dmin:.1}, max {dmax:.1}); {dispatches} dispatches per token",
            args.gen_tokens
        );
        if args.profile {
            println!(
                "one pass of {} token(s), GPU time per kernel (one compute pass each):",
                args.profile_tokens
            );
            for (k, (us, n)) in &kernels {
                println!(
                    "  {k:28} x{n:<4} {us:10.1} us {:5.1}%",
                    100.0 * us / kernel_total
                );
            }
            println!("  total {kernel_total:.1} us");
        }
    }
    Ok(())
}
