//! Sampling parameters and the host side of sampling: the seeded random numbers the GPU sampler
//! draws with. The chain itself runs on the GPU (wgsl/sample_topk.wgsl, wgsl/sample.wgsl);
//! [`reference_sample`] is the same chain on the CPU, for tests.

/// Most candidates the GPU sampler keeps after top-k. A top-k of 0 (off) or above this means
/// this many: the probability mass past the 64 most likely tokens is dropped, where llama.cpp
/// would keep it before top-p and min-p.
pub const MAX_TOP_K: u32 = 64;

/// Most recent tokens the repetition penalty looks at.
pub const MAX_REPEAT_LAST_N: u32 = 256;

/// llama.cpp's sampler settings. [`Default`] is llama.cpp's CLI defaults (what `tandem run`
/// uses), [`SamplerParams::chat`] what a chat starts from; [`Sampling`] layers a model's
/// recommendation and the user's choices over either.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SamplerParams {
    /// 0 or below: greedy (argmax).
    #[serde(serialize_with = "shortest")]
    pub temperature: f32,
    /// 0: off (the GPU keeps at most [`MAX_TOP_K`]).
    pub top_k: u32,
    #[serde(serialize_with = "shortest")]
    pub top_p: f32,
    #[serde(serialize_with = "shortest")]
    pub min_p: f32,
    /// 1: off.
    #[serde(serialize_with = "shortest")]
    pub repeat_penalty: f32,
    pub repeat_last_n: u32,
    pub seed: u64,
}

/// An f32 as the f64 with the same shortest decimal form (0.95, not 0.949999988079071), as
/// JSON readers (JavaScript, serde_json::Value) take every number for an f64.
pub fn shortest_f64(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(x as f64)
}

fn shortest<S: serde::Serializer>(x: &f32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(shortest_f64(*x))
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
    /// The chat defaults, where the model recommends nothing: greedy, llama.cpp's otherwise (so
    /// a chat with `--temperature` alone samples with llama.cpp's chain).
    ///
    /// Why greedy: a small model's first token is often a near tie. SmolLM2-135M-Instruct asked
    /// "What is the capital of France?" gives (transformers, same GGUF) "The" 15.2%, "L" 14.0%,
    /// "La" 10.4%; "The" leads to Paris, "L"/"La" to rambling French. No temperature short of
    /// greedy separates a 15:14 tie: after top-p 0.9, "The" is drawn 23% of the time at 0.8
    /// (llama.cpp's default: French in 5 of 6 seeds), 55% at 0.2 with top-p 0.9 (its authors'
    /// recommendation: French in 3 of 6 seeds here), 68% at 0.1. A model whose GGUF recommends a
    /// sampling gets that instead (see [`Sampling::from_gguf`]).
    pub fn chat() -> Self {
        SamplerParams {
            temperature: 0.0,
            ..Default::default()
        }
    }

    /// The defaults of `mode`.
    pub fn defaults(mode: Mode) -> Self {
        match mode {
            Mode::Text => SamplerParams::default(),
            Mode::Chat => SamplerParams::chat(),
        }
    }

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

/// What the sampling defaults are for: continuing raw text (`tandem run`) or a chat turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Text,
    Chat,
}

/// Sampler settings that may each be unset: what a user chose, or what a model recommends.
/// `choice.or(recommended).over(SamplerParams::defaults(mode))` is the precedence llama.cpp
/// uses: the user's, else the model's, else the defaults.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Sampling {
    pub temperature: Option<f32>,
    pub top_k: Option<u32>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub repeat_penalty: Option<f32>,
    pub repeat_last_n: Option<u32>,
    pub seed: Option<u64>,
}

/// The GGUF keys of a model's recommended sampling, as llama.cpp's converter writes them from
/// generation_config.json (gguf-py `Keys.General.SAMPLING_*`) and llama.cpp reads them.
pub mod gguf_keys {
    pub const TEMPERATURE: &str = "general.sampling.temp";
    pub const TOP_K: &str = "general.sampling.top_k";
    pub const TOP_P: &str = "general.sampling.top_p";
    pub const MIN_P: &str = "general.sampling.min_p";
    pub const REPEAT_PENALTY: &str = "general.sampling.penalty_repeat";
    pub const REPEAT_LAST_N: &str = "general.sampling.penalty_last_n";
}

impl Sampling {
    /// The sampling the model's GGUF recommends (`general.sampling.*`), each key where present.
    /// A key of the wrong type or out of range is skipped: it is advice, not part of the model.
    /// `penalty_last_n` of -1 (llama.cpp: the whole context) becomes [`MAX_REPEAT_LAST_N`].
    pub fn from_gguf(g: &crate::gguf::Gguf) -> Self {
        let float = |k: &str| g.get(k).and_then(|v| v.as_f32()).filter(|v| v.is_finite());
        let int = |k: &str| g.get(k).and_then(|v| v.as_i64());
        Sampling {
            temperature: float(gguf_keys::TEMPERATURE),
            top_k: int(gguf_keys::TOP_K).and_then(|v| u32::try_from(v).ok()),
            top_p: float(gguf_keys::TOP_P),
            min_p: float(gguf_keys::MIN_P),
            repeat_penalty: float(gguf_keys::REPEAT_PENALTY),
            repeat_last_n: int(gguf_keys::REPEAT_LAST_N).and_then(|v| match v {
                -1 => Some(MAX_REPEAT_LAST_N),
                v => u32::try_from(v).ok(),
            }),
            seed: None,
        }
    }

    /// Each setting from `self` where set, else from `other`.
    pub fn or(self, other: Sampling) -> Sampling {
        Sampling {
            temperature: self.temperature.or(other.temperature),
            top_k: self.top_k.or(other.top_k),
            top_p: self.top_p.or(other.top_p),
            min_p: self.min_p.or(other.min_p),
            repeat_penalty: self.repeat_penalty.or(other.repeat_penalty),
            repeat_last_n: self.repeat_last_n.or(other.repeat_last_n),
            seed: self.seed.or(other.seed),
        }
    }

    /// `base` with every setting of `self` that is set.
    pub fn over(&self, base: SamplerParams) -> SamplerParams {
        SamplerParams {
            temperature: self.temperature.unwrap_or(base.temperature),
            top_k: self.top_k.unwrap_or(base.top_k),
            top_p: self.top_p.unwrap_or(base.top_p),
            min_p: self.min_p.unwrap_or(base.min_p),
            repeat_penalty: self.repeat_penalty.unwrap_or(base.repeat_penalty),
            repeat_last_n: self.repeat_last_n.unwrap_or(base.repeat_last_n),
            seed: self.seed.unwrap_or(base.seed),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Sampling::default()
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
    draw(&candidates(logits, history, params), u)
}

/// The tokens the sampling chain can draw from one row of logits, most likely first, with their
/// weights (unnormalised probabilities: penalty, top-k, top-p and min-p, then the temperature);
/// greedy parameters keep the argmax alone. Speculative sampling weighs drafts with them.
pub fn candidates(logits: &[f32], history: &[u32], params: &SamplerParams) -> Vec<(u32, f32)> {
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
        return vec![(order[0], 1.0)];
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
    order[..kept]
        .iter()
        .map(|&i| (i, ((l[i as usize] - m) / params.temperature).exp()))
        .collect()
}

/// Draws from weighted `candidates` with the uniform `u` (the GPU's rule: the first whose running
/// weight passes `u` times the total).
pub fn draw(candidates: &[(u32, f32)], u: f32) -> u32 {
    let target = u * candidates.iter().map(|c| c.1).sum::<f32>();
    let mut acc = 0.0;
    for &(id, w) in candidates {
        acc += w;
        if acc > target {
            return id;
        }
    }
    candidates[candidates.len() - 1].0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::Gguf;

    /// A GGUF v3 file with no tensors and these metadata pairs (f32 = type 6, i32 = 5, string = 8).
    fn gguf(kvs: &[(&str, u32, Vec<u8>)]) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend((kvs.len() as u64).to_le_bytes());
        for (k, ty, v) in kvs {
            b.extend((k.len() as u64).to_le_bytes());
            b.extend(k.as_bytes());
            b.extend(ty.to_le_bytes());
            b.extend(v);
        }
        b
    }

    fn string(s: &str) -> Vec<u8> {
        let mut v = (s.len() as u64).to_le_bytes().to_vec();
        v.extend(s.as_bytes());
        v
    }

    #[test]
    fn sampling_recommended_by_the_gguf_is_read() {
        let bytes = gguf(&[
            ("general.architecture", 8, string("llama")),
            (gguf_keys::TEMPERATURE, 6, 0.6f32.to_le_bytes().to_vec()),
            (gguf_keys::TOP_K, 5, 20i32.to_le_bytes().to_vec()),
            (gguf_keys::TOP_P, 6, 0.95f32.to_le_bytes().to_vec()),
            (gguf_keys::MIN_P, 6, 0f32.to_le_bytes().to_vec()),
            (gguf_keys::REPEAT_LAST_N, 5, (-1i32).to_le_bytes().to_vec()),
            // Of the wrong type: skipped.
            (gguf_keys::REPEAT_PENALTY, 8, string("1.1")),
        ]);
        let g = Gguf::parse(&bytes.as_slice()).unwrap();
        let s = Sampling::from_gguf(&g);
        assert_eq!(
            s,
            Sampling {
                temperature: Some(0.6),
                top_k: Some(20),
                top_p: Some(0.95),
                // A recommended zero is a choice, kept as one.
                min_p: Some(0.0),
                repeat_penalty: None,
                repeat_last_n: Some(MAX_REPEAT_LAST_N),
                seed: None,
            }
        );
        let none = gguf(&[("general.architecture", 8, string("llama"))]);
        assert!(Sampling::from_gguf(&Gguf::parse(&none.as_slice()).unwrap()).is_empty());
    }

    #[test]
    fn sampling_precedence_is_user_then_model_then_defaults() {
        let user = Sampling {
            temperature: Some(0.0),
            seed: Some(7),
            ..Default::default()
        };
        let model = Sampling {
            temperature: Some(0.6),
            top_k: Some(20),
            ..Default::default()
        };
        let p = user.or(model).over(SamplerParams::defaults(Mode::Chat));
        assert_eq!(p.temperature, 0.0);
        assert_eq!(p.seed, 7);
        assert_eq!(p.top_k, 20);
        assert_eq!(p.top_p, SamplerParams::chat().top_p);
        assert_eq!(p.min_p, SamplerParams::chat().min_p);
        // Nothing set: the mode's defaults; chat differs from llama.cpp's only in being greedy.
        let text = Sampling::default().over(SamplerParams::defaults(Mode::Text));
        assert_eq!(text, SamplerParams::default());
        let chat = SamplerParams::chat();
        assert!(chat.is_greedy() && !text.is_greedy());
        assert_eq!(
            SamplerParams {
                temperature: text.temperature,
                ..chat
            },
            text
        );
    }
}
