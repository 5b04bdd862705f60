//! The benchmark protocol that `tandem bench` and the npm package's `engine.bench` share:
//! prefill and decode speed as medians over distinct prompts, each a fresh request (empty KV
//! cache), per MEASURE.md; optionally the per-kernel split of one pass, each kernel group's bytes
//! read, GB/s and FLOP/s against the streaming-read bandwidth measured here. With a drafter,
//! decode is speculative (greedy: the same tokens) and the result says what the drafts did.
//! Platform-neutral: every GPU wait is awaited, the clock is [`now_seconds`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::kernels::stream::stream_bytes;
use crate::kernels::stream_read_bandwidth;
use crate::model::Session;
use crate::platform::now_seconds;
use crate::sampling::Sampler;
use crate::speculative::{self, DraftLen, Drafter, GuardOptions, SpecDecoder, SpecStats};
use crate::{Error, Result};

/// What to measure.
#[derive(Clone, Debug, Deserialize)]
pub struct BenchOptions {
    /// Distinct prompts (each run from an empty cache), pseudo-random ([`prompt`]) unless
    /// `prompt_ids` gives them.
    pub prompts: usize,
    /// Tokens per pseudo-random prompt.
    pub prompt_tokens: usize,
    /// Prompts given as token ids (texts the caller tokenized: what a drafter accepts depends on
    /// the text), in place of the pseudo-random ones; empty: those.
    #[serde(default)]
    pub prompt_ids: Vec<Vec<u32>>,
    /// Tokens generated per prompt (the first comes from the prefill, so decode is timed over the rest).
    pub gen_tokens: usize,
    /// Also time every kernel of one pass with GPU timestamps.
    pub profile: bool,
    /// Tokens of the profiled pass: 1 is a decode step, more a prompt chunk.
    pub profile_tokens: u32,
    /// Token counts of verification passes to time whole (GPU timestamps around one pass, the
    /// median of [`PASS_REPEATS`]), each against a one-token pass; empty: none.
    #[serde(default)]
    pub pass_tokens: Vec<u32>,
    /// Most drafts a speculative step proposes (with a drafter).
    pub draft_max: usize,
    /// The draft length follows the acceptance (within 1..=`draft_max`).
    pub draft_adaptive: bool,
    /// With a drafter, each request speculates only while it measures faster than plain
    /// decode steps, as generation does ([`crate::speculative::SpeedGuard`]); `None`: on every
    /// step, to time speculation itself.
    #[serde(skip)]
    pub guard: Option<GuardOptions>,
}

impl BenchOptions {
    /// KV-cache positions the run needs.
    pub fn context_needed(&self) -> u32 {
        let widest = self.pass_tokens.iter().copied().max().unwrap_or(0);
        (self.longest_prompt() + self.gen_tokens) as u32 + self.profile_tokens.max(widest)
    }

    /// Prompts the run feeds.
    pub fn n_prompts(&self) -> usize {
        if self.prompt_ids.is_empty() {
            self.prompts
        } else {
            self.prompt_ids.len()
        }
    }

    /// Tokens of the longest prompt.
    pub fn longest_prompt(&self) -> usize {
        if self.prompt_ids.is_empty() {
            self.prompt_tokens
        } else {
            self.prompt_ids.iter().map(Vec::len).max().unwrap_or(0)
        }
    }
}

/// Median, min and max of per-prompt speeds, in tokens per second.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Spread {
    pub max: f64,
    pub median: f64,
    pub min: f64,
}

impl Spread {
    fn of(mut v: Vec<f64>) -> Spread {
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            max: v[n - 1],
            median,
            min: v[0],
        }
    }
}

/// One kernel group of the profile: the dispatches whose labels differ only in the layer.
/// (Fields in key order: the JSON's keys come out sorted, as `tandem bench --json` always printed.)
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct KernelGroup {
    /// Bytes read (each byte once).
    pub bytes: f64,
    pub dispatches: usize,
    /// Floating-point operations (0 where none are matrix products or attention).
    pub flops: f64,
    pub gigabytes_per_second: f64,
    /// GPU time.
    pub microseconds: f64,
    /// Of the streaming-read ceiling, where there is one.
    pub percent_of_ceiling: Option<f64>,
    pub percent_of_pass: f64,
    /// `None` where the group does no matrix arithmetic.
    pub teraflops_per_second: Option<f64>,
}

impl KernelGroup {
    fn finish(&mut self, pass_us: f64, ceiling: Option<f64>) {
        self.gigabytes_per_second = if self.microseconds > 0.0 {
            self.bytes / self.microseconds / 1e3
        } else {
            0.0
        };
        self.teraflops_per_second = (self.flops > 0.0 && self.microseconds > 0.0)
            .then(|| self.flops / self.microseconds / 1e6);
        self.percent_of_ceiling = ceiling.map(|c| 100.0 * self.gigabytes_per_second * 1e9 / c);
        self.percent_of_pass = if pass_us > 0.0 {
            100.0 * self.microseconds / pass_us
        } else {
            0.0
        };
    }
}

/// One timed pass ([`BenchOptions::pass_tokens`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PassTime {
    /// Bytes the pass reads, each once (for a MoE batch, every route to an expert no other route
    /// took: a bound).
    pub bytes: f64,
    /// GPU time of the whole pass, median of [`PASS_REPEATS`].
    pub microseconds: f64,
    /// Its time over a one-token pass's (a decode step's) in the same run.
    pub of_decode_pass: f64,
    pub tokens: u32,
}

/// Runs of each timed pass ([`BenchOptions::pass_tokens`]); the median is reported.
pub const PASS_REPEATS: usize = 9;

/// The streaming-read bandwidth the profile's GB/s are set against.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ceiling {
    /// The buffer `stream_read.wgsl` reads.
    pub buffer_bytes: u64,
    /// Best of 6; `None` where the adapter has no timestamp queries.
    pub bytes_per_second: Option<f64>,
    pub kernel: String,
}

/// The result: exactly the object `tandem bench --json` prints (keys in this order).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchResult {
    /// The adapter, as `Gpu::describe` puts it.
    pub adapter: String,
    pub decode_tokens_per_second: Spread,
    /// Dispatches of a decode step where the last prompt's decode ended (the profiled pass's).
    pub dispatches_per_token: usize,
    pub gen_tokens: usize,
    /// Kernel groups of the profiled pass (empty without the profile).
    pub kernels: BTreeMap<String, KernelGroup>,
    /// The timed passes, a one-token pass first (empty where none were asked for, or where the
    /// adapter has no timestamp queries).
    pub passes: Vec<PassTime>,
    pub prefill_tokens_per_second: Spread,
    pub profile_tokens: u32,
    /// Tokens of each prompt (with given prompts, the longest's).
    pub prompt_tokens: usize,
    pub prompts: usize,
    /// With a drafter: what the drafts did over all prompts (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculation: Option<Speculation>,
    /// Present with the profile (its `bytes_per_second` `None`, and `kernels` empty, where the
    /// adapter has no timestamp queries).
    pub streaming_read_ceiling: Option<Ceiling>,
}

/// Speculative decoding over a bench run (the keys `tandem run --json` uses).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Speculation {
    pub draft_tokens: usize,
    pub accepted_tokens: usize,
    pub acceptance_rate: f64,
    pub tokens_per_pass: f64,
    /// Tokens plain decode steps made where the speed guard found them faster.
    pub plain_tokens: usize,
}

impl From<SpecStats> for Speculation {
    fn from(s: SpecStats) -> Speculation {
        Speculation {
            draft_tokens: s.drafted,
            accepted_tokens: s.accepted,
            acceptance_rate: s.acceptance_rate(),
            tokens_per_pass: s.tokens_per_pass(),
            plain_tokens: s.plain,
        }
    }
}

impl BenchResult {
    /// All kernel groups together (the profile table's total row).
    pub fn kernel_total(&self) -> KernelGroup {
        let mut all = KernelGroup::default();
        for g in self.kernels.values() {
            all.dispatches += g.dispatches;
            all.microseconds += g.microseconds;
            all.bytes += g.bytes;
            all.flops += g.flops;
        }
        let ceiling = self
            .streaming_read_ceiling
            .as_ref()
            .and_then(|c| c.bytes_per_second);
        let us = all.microseconds;
        all.finish(us, ceiling);
        all.percent_of_pass = 100.0;
        all
    }
}

/// A deterministic pseudo-random prompt: distinct per index, ids drawn from the vocabulary.
pub fn prompt(index: usize, len: usize, n_vocab: u32) -> Vec<u32> {
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

/// Seconds of decoding before a profile ([`run`]), so that the GPU's clocks have risen.
const PROFILE_WARM_SECONDS: f64 = 1.0;

/// Runs the protocol on `s` (whose context must hold [`BenchOptions::context_needed`]
/// positions; a prompt that does not fit is a context-overflow error): one warm-up request
/// (with `profile` or timed passes, warm-up requests for [`PROFILE_WARM_SECONDS`]), then each
/// prompt from an empty cache, `on_prompt(index, prefill tok/s, decode tok/s)` after each; then,
/// with `profile`, the streaming-read ceiling and one profiled pass at the end of the last
/// prompt's context, and there the timed passes. The cache is left in use. With `drafter`, each prompt's tokens after the first come
/// from speculative steps.
pub async fn run(
    s: &mut Session,
    mut drafter: Option<&mut Drafter<'_>>,
    opts: &BenchOptions,
    mut on_prompt: impl FnMut(usize, f64, f64),
) -> Result<BenchResult> {
    if let Some(d) = &drafter {
        d.check(s)?;
    }
    let n_prompts = opts.n_prompts();
    let empty_prompt = opts.longest_prompt() == 0 || opts.prompt_ids.iter().any(Vec::is_empty);
    if n_prompts == 0 || empty_prompt || opts.gen_tokens == 0 {
        return Err(Error::InvalidArgument(
            "bench needs at least 1 prompt, 1 token in each and 1 generated token".into(),
        ));
    }
    if opts.profile_tokens == 0 {
        return Err(Error::InvalidArgument(
            "bench: profile tokens must be at least 1".into(),
        ));
    }
    let n_vocab = s.model.config.n_vocab;
    let greedy = &mut Sampler::greedy();
    // Warm up: compile every pipeline and touch every buffer once.
    let warm = prompt(usize::MAX, opts.longest_prompt().max(2), n_vocab);
    let warm_stats = &mut SpecStats::default();
    generate(
        s,
        drafter.as_deref_mut(),
        &warm,
        2,
        opts,
        greedy,
        warm_stats,
    )
    .await?;
    let timed = s.model.gpu.features.timestamps;
    if opts.profile || !opts.pass_tokens.is_empty() {
        // A GPU idle at start runs its first kernels at a lower clock (H200: short profile runs
        // read the streaming ceiling and every kernel at about half speed): keep it busy first.
        let start = now_seconds();
        while now_seconds() - start < PROFILE_WARM_SECONDS {
            generate(
                s,
                drafter.as_deref_mut(),
                &warm,
                opts.gen_tokens,
                opts,
                greedy,
                warm_stats,
            )
            .await?;
        }
    }
    let (mut prefill, mut decode) = (Vec::new(), Vec::new());
    let mut stats = SpecStats::default();
    for i in 0..n_prompts {
        let p = match opts.prompt_ids.get(i) {
            Some(ids) => ids.clone(),
            None => prompt(i, opts.prompt_tokens, n_vocab),
        };
        let (t0, t1) = generate(
            s,
            drafter.as_deref_mut(),
            &p,
            opts.gen_tokens,
            opts,
            greedy,
            &mut stats,
        )
        .await?;
        let t2 = now_seconds();
        prefill.push(p.len() as f64 / (t1 - t0));
        decode.push((opts.gen_tokens - 1) as f64 / (t2 - t1));
        on_prompt(i, prefill[i], decode[i]);
    }
    let mut kernels: BTreeMap<String, KernelGroup> = BTreeMap::new();
    let mut streaming_read_ceiling = None;
    if opts.profile {
        // The adapter's streaming-read bandwidth, measured here, for every kernel's GB/s.
        let ceiling = stream_read_bandwidth(&s.model.gpu).await?;
        // One pass at the end of the last prompt's context, where the adapter has timestamps
        // (without them the ceiling is `None` and `kernels` stays empty).
        let prof = if timed {
            s.profile(opts.profile_tokens).await?
        } else {
            Vec::new()
        };
        let mut pass_us = 0.0;
        for k in prof {
            // Group per-layer tensors: blk.7.ffn_up.weight -> ffn_up.weight.
            let key: Vec<&str> = k
                .label
                .split('.')
                .filter(|p| *p != "blk" && p.parse::<u32>().is_err())
                .collect();
            let e = kernels.entry(key.join(".")).or_default();
            e.microseconds += k.ns / 1e3;
            e.dispatches += 1;
            e.bytes += k.bytes;
            e.flops += k.flops;
            pass_us += k.ns / 1e3;
        }
        for g in kernels.values_mut() {
            g.finish(pass_us, ceiling);
        }
        streaming_read_ceiling = Some(Ceiling {
            buffer_bytes: stream_bytes(&s.model.gpu),
            bytes_per_second: ceiling,
            kernel: "stream_read".into(),
        });
    }
    let mut passes = Vec::new();
    if timed && !opts.pass_tokens.is_empty() {
        let counts = std::iter::once(1).chain(opts.pass_tokens.iter().copied().filter(|&n| n != 1));
        for n in counts {
            let mut runs = Vec::with_capacity(PASS_REPEATS);
            let mut bytes = 0.0;
            for _ in 0..PASS_REPEATS {
                let t = s.pass_time(n).await?;
                runs.push(t.ns / 1e3);
                bytes = t.bytes;
            }
            let microseconds = Spread::of(runs).median;
            let base = passes
                .first()
                .map_or(microseconds, |p: &PassTime| p.microseconds);
            passes.push(PassTime {
                bytes,
                microseconds,
                of_decode_pass: microseconds / base,
                tokens: n,
            });
        }
    }
    Ok(BenchResult {
        adapter: s.model.gpu.describe(),
        decode_tokens_per_second: Spread::of(decode),
        dispatches_per_token: s.dispatches_at(s.pos()),
        gen_tokens: opts.gen_tokens,
        kernels,
        passes,
        prefill_tokens_per_second: Spread::of(prefill),
        profile_tokens: opts.profile_tokens,
        prompt_tokens: opts.longest_prompt(),
        prompts: n_prompts,
        speculation: drafter.is_some().then(|| stats.into()),
        streaming_read_ceiling,
    })
}

/// One request from an empty cache: `prompt`, then `n` tokens (the first from the prefill),
/// greedily, speculating as `opts` says, adding what the drafts did to `stats`. Returns when it
/// began and when the prefill ended.
async fn generate(
    s: &mut Session,
    mut drafter: Option<&mut Drafter<'_>>,
    prompt: &[u32],
    n: usize,
    opts: &BenchOptions,
    greedy: &mut Sampler,
    stats: &mut SpecStats,
) -> Result<(f64, f64)> {
    s.truncate(0);
    let t0 = now_seconds();
    let (mut last, _) = speculative::prefill(s, drafter.as_deref(), prompt, greedy).await?;
    let t1 = now_seconds();
    let len = DraftLen::new(opts.draft_max, opts.draft_adaptive);
    let mut spec = SpecDecoder::new(len, opts.guard);
    let mut made = 1;
    while made < n {
        match drafter.as_deref_mut() {
            Some(d) => {
                let new = spec.next(s, d, last, n - made, greedy).await?;
                made += new.len();
                last = *new.last().expect("a step makes at least one token");
            }
            None => {
                last = s.decode(greedy).await?;
                made += 1;
            }
        }
    }
    stats.add(&spec.stats);
    Ok((t0, t1))
}
