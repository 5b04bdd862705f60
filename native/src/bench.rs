//! `tandem bench`: prefill and decode speed as medians over distinct prompts, each a fresh
//! request (empty KV cache), per MEASURE.md; optionally the per-kernel split of one pass, each
//! kernel group's bytes read, GB/s and FLOP/s against the streaming-read bandwidth measured here.

use std::collections::BTreeMap;

use clap::Args;
use serde_json::json;
use tandem_engine::kernels::stream::stream_bytes;
use tandem_engine::kernels::stream_read_bandwidth;
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
    /// Also time every kernel of one decode step with GPU timestamps, with the bytes each reads,
    /// its GB/s and FLOP/s, against the streaming-read bandwidth measured first
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

/// One kernel group of the profile: the dispatches whose labels differ only in the layer.
#[derive(Default)]
struct Group {
    dispatches: usize,
    us: f64,
    bytes: f64,
    flops: f64,
}

impl Group {
    /// Bytes read per second, in GB/s.
    fn gb_per_s(&self) -> f64 {
        if self.us > 0.0 {
            self.bytes / self.us / 1e3
        } else {
            0.0
        }
    }
    /// FLOP/s in TFLOP/s, or `None` where the group does no matrix arithmetic.
    fn tflops(&self) -> Option<f64> {
        (self.flops > 0.0 && self.us > 0.0).then(|| self.flops / self.us / 1e6)
    }
    /// Percent of the ceiling (bytes per second), where there is one.
    fn of_ceiling(&self, ceiling: Option<f64>) -> Option<f64> {
        ceiling.map(|c| 100.0 * self.gb_per_s() * 1e9 / c)
    }
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
    let mut kernels: BTreeMap<String, Group> = BTreeMap::new();
    let mut kernel_total = 0.0;
    let mut ceiling = None;
    let ceiling_bytes = stream_bytes(&s.model.gpu);
    if args.profile {
        // The adapter's streaming-read bandwidth, measured here, for every kernel's GB/s.
        ceiling = pollster::block_on(stream_read_bandwidth(&s.model.gpu))?;
        // One pass at the end of the last prompt's context.
        let prof = pollster::block_on(s.profile(args.profile_tokens))?;
        for k in prof {
            // Group per-layer tensors: blk.7.ffn_up.weight -> ffn_up.weight.
            let key: Vec<&str> = k
                .label
                .split('.')
                .filter(|p| *p != "blk" && p.parse::<u32>().is_err())
                .collect();
            let e = kernels.entry(key.join(".")).or_default();
            e.us += k.ns / 1e3;
            e.dispatches += 1;
            e.bytes += k.bytes;
            e.flops += k.flops;
            kernel_total += k.ns / 1e3;
        }
    }
    let percent = |us: f64| {
        if kernel_total > 0.0 {
            100.0 * us / kernel_total
        } else {
            0.0
        }
    };
    if args.json {
        let k: BTreeMap<_, _> = kernels
            .iter()
            .map(|(k, g)| {
                (
                    k.clone(),
                    json!({
                        "microseconds": g.us,
                        "dispatches": g.dispatches,
                        "percent_of_pass": percent(g.us),
                        "bytes": g.bytes,
                        "gigabytes_per_second": g.gb_per_s(),
                        "percent_of_ceiling": g.of_ceiling(ceiling),
                        "flops": g.flops,
                        "teraflops_per_second": g.tflops(),
                    }),
                )
            })
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
                "streaming_read_ceiling": args.profile.then(|| json!({
                    "bytes_per_second": ceiling,
                    "buffer_bytes": ceiling_bytes,
                    "kernel": "stream_read",
                })),
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
            match ceiling {
                Some(c) => println!(
                    "streaming-read ceiling: {:.1} GB/s (stream_read.wgsl over {} MiB, best of 6)",
                    c / 1e9,
                    ceiling_bytes >> 20
                ),
                None => println!(
                    "streaming-read ceiling: not measured (the adapter has no timestamp queries)"
                ),
            }
            println!(
                "one pass of {} token(s), GPU time per kernel group (one compute pass each); \
                 bytes read count each byte once; TFLOP/s for matrix products and attention:",
                args.profile_tokens
            );
            println!(
                "  {:28} {:>5} {:>10} {:>6} {:>10} {:>8} {:>6} {:>8}",
                "kernel", "n", "us", "%pass", "MB read", "GB/s", "%ceil", "TFLOP/s"
            );
            let (mut bytes, mut flops) = (0.0, 0.0);
            for (k, g) in &kernels {
                let ceil = g
                    .of_ceiling(ceiling)
                    .map_or("-".into(), |p| format!("{p:.1}"));
                let tf = g.tflops().map_or("-".into(), |t| format!("{t:.3}"));
                println!(
                    "  {k:28} {:>5} {:10.1} {:6.1} {:10.2} {:8.1} {ceil:>6} {tf:>8}",
                    g.dispatches,
                    g.us,
                    percent(g.us),
                    g.bytes / 1e6,
                    g.gb_per_s(),
                );
                bytes += g.bytes;
                flops += g.flops;
            }
            let all = Group {
                dispatches: kernels.values().map(|g| g.dispatches).sum(),
                us: kernel_total,
                bytes,
                flops,
            };
            let ceil = all
                .of_ceiling(ceiling)
                .map_or("-".into(), |p| format!("{p:.1}"));
            let tf = all.tflops().map_or("-".into(), |t| format!("{t:.3}"));
            println!(
                "  {:28} {:>5} {:10.1} {:6.1} {:10.2} {:8.1} {ceil:>6} {tf:>8}",
                "total",
                all.dispatches,
                kernel_total,
                100.0,
                bytes / 1e6,
                all.gb_per_s(),
            );
        }
    }
    Ok(())
}
