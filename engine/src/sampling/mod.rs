//! Sampling parameters and the host side of sampling: the seeded random numbers the GPU sampler
//! draws with. The chain itself runs on the GPU (wgsl/sample_topk.wgsl, wgsl/sample.wgsl);
//! [`reference_sample`] is the same chain on the CPU, for tests.

/// Most candidates the GPU sampler keeps after top-k. A top-k of 0 (off) or above this means
/// this many: the probability mass past the 64 most likely tokens is dropped, where llama.cpp
/// would keep it before top-p and min-p.
pub const MAX_TOP_K: u32 = 64;

/// Most recent tokens the repetition penalty looks at.
pub const MAX_REPEAT_LAST_N: u32 = 256;

/// llama.cpp's sampler settings, with its CLI defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerParams {
    /// 0 or below: greedy (argmax).
    pub temperature: f32,
    /// 0: off (the GPU keeps at most [`MAX_TOP_K`]).
    pub top_k: u32,
    pub top_p: f32,
    pub min_p: f32,
    /// 1: off.
    pub repeat_penalty: f32,
    pub repeat_last_n: u32,
    pub seed: u64,
}

impl Default for SamplerParams {
    fn default() -> Self {
        SamplerParams {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            seed: 0x5EED,
        }
    }
}

impl SamplerParams {
    pub fn greedy() -> Self {
        SamplerParams {
            temperature: 0.0,
            ..Default::default()
        }
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    /// Whether sampling a token reads the tokens before it (the repeat penalty), so the pass
    /// that samples it cannot be recorded before the host knows the last one.
    pub fn reads_history(&self) -> bool {
        !self.is_greedy() && self.repeat_penalty != 1.0 && self.repeat_last_n > 0
    }

    /// The top-k the GPU applies.
    pub fn effective_top_k(&self) -> u32 {
        if self.top_k == 0 {
            MAX_TOP_K
        } else {
            self.top_k.min(MAX_TOP_K)
        }
    }
}

/// Sampler state: its parameters and the random stream (splitmix64, seeded).
#[derive(Clone, Debug)]
pub struct Sampler {
    pub params: SamplerParams,
    state: u64,
}

impl Sampler {
    pub fn new(params: SamplerParams) -> Self {
        let state = params.seed;
        Sampler { params, state }
    }

    pub fn greedy() -> Self {
        Sampler::new(SamplerParams::greedy())
    }

    /// The next uniform number in [0, 1).
    pub fn next_uniform(&mut self) -> f32 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// The GPU's sampling chain on the CPU: repetition penalty over the distinct ids among the last
/// `repeat_last_n` of `history`,
/// top-k (lowest id first on ties), top-p and min-p on the softmax at temperature 1, then the
/// temperature and a draw with `u`. Greedy parameters give the argmax (lowest id on ties).
pub fn reference_sample(logits: &[f32], history: &[u32], params: &SamplerParams, u: f32) -> u32 {
    let mut l = logits.to_vec();
    let mut seen = std::collections::HashSet::new();
    if params.repeat_penalty != 1.0 {
        let n = (params.repeat_last_n.min(MAX_REPEAT_LAST_N) as usize).min(history.len());
        for &id in &history[history.len() - n..] {
            if seen.insert(id) && (id as usize) < l.len() {
                let v = &mut l[id as usize];
                *v = if *v > 0.0 {
                    *v / params.repeat_penalty
                } else {
                    *v * params.repeat_penalty
                };
            }
        }
    }
    let mut order: Vec<u32> = (0..l.len() as u32).collect();
    order.sort_by(|&a, &b| l[b as usize].total_cmp(&l[a as usize]).then(a.cmp(&b)));
    if params.is_greedy() {
        return order[0];
    }
    order.truncate(params.effective_top_k() as usize);
    let m = l[order[0] as usize];
    let e: Vec<f32> = order.iter().map(|&i| (l[i as usize] - m).exp()).collect();
    let total: f32 = e.iter().sum();
    let mut keep = order.len();
    if params.top_p < 1.0 {
        let mut cum = 0.0;
        for (i, v) in e.iter().enumerate() {
            cum += v / total;
            if cum >= params.top_p {
                keep = i + 1;
                break;
            }
        }
    }
    let kept = 1 + e[1..keep]
        .iter()
        .take_while(|&&v| v >= params.min_p)
        .count();
    let w: Vec<f32> = order[..kept]
        .iter()
        .map(|&i| ((l[i as usize] - m) / params.temperature).exp())
        .collect();
    let target = u * w.iter().sum::<f32>();
    let mut acc = 0.0;
    for (i, v) in w.iter().enumerate() {
        acc += v;
        if acc > target {
            return order[i];
        }
    }
    order[kept - 1]
}
