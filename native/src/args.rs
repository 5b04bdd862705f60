//! The arguments several commands share: which model and how to run it ([`ModelArgs`]), and
//! the sampling flags of `run` and `chat` ([`SamplingArgs`]).

use std::path::PathBuf;

use clap::Args;
use tandem_engine::model::{KvType, SessionOptions};
use tandem_engine::sampling::{Mode, SamplerParams, Sampling, MAX_TOP_K};

#[derive(Args, Clone)]
pub struct ModelArgs {
    /// GGUF model file [default: SmolLM2-135M-Instruct in the model cache, see scripts/fetch-models.sh]
    #[arg(short, long)]
    pub model: Option<PathBuf>,
    /// Context size in tokens [default: the model's, at most 4096]
    #[arg(short = 'c', long)]
    pub ctx: Option<u32>,
    /// Most tokens per forward pass when reading a prompt (llama.cpp's default too)
    #[arg(long, default_value_t = 512)]
    pub ubatch: u32,
    /// Most rows of logits one pass returns (not a flag: `perplexity` raises it to its chunk's
    /// scored half)
    #[arg(skip = SessionOptions::default().outputs)]
    pub outputs: u32,
    /// What the KV cache holds: f16 (half the memory) or f32
    #[arg(long, value_enum, default_value_t = KvTypeArg::F16)]
    pub kv_type: KvTypeArg,
    /// Use the adapter's software fallback (lavapipe, SwiftShader) instead of a GPU
    #[arg(long)]
    pub software: bool,
    /// Use only the portable kernels (no shader-f16, no subgroups), as in a browser without them
    #[arg(long)]
    pub portable: bool,
    /// Print nothing but the result (no adapter line, no progress bar, no speeds)
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(clap::ValueEnum, Clone, Copy)]
pub enum KvTypeArg {
    F16,
    F32,
}

impl From<KvTypeArg> for KvType {
    fn from(k: KvTypeArg) -> KvType {
        match k {
            KvTypeArg::F16 => KvType::F16,
            KvTypeArg::F32 => KvType::F32,
        }
    }
}

/// The sampling flags. Each one left out comes from the model's recommendation (its GGUF's
/// `general.sampling.*` keys) where it has one, else from the defaults of the mode: llama.cpp's
/// for raw text, [`SamplerParams::chat`] for a chat turn.
#[derive(Args, Clone)]
pub struct SamplingArgs {
    #[arg(long, visible_alias = "temp", help = default_help("Sampling temperature; 0 is greedy (argmax) decoding", |p| p.temperature))]
    pub temperature: Option<f32>,
    #[arg(long, help = default_help(&format!("Keep the K most likely tokens (0: off; the GPU sampler keeps at most {MAX_TOP_K})"), |p| p.top_k))]
    pub top_k: Option<u32>,
    #[arg(long, help = default_help("Keep the most likely tokens whose probabilities add up to P (1: off)", |p| p.top_p))]
    pub top_p: Option<f32>,
    #[arg(long, help = default_help("Drop tokens less likely than P times the most likely one (0: off)", |p| p.min_p))]
    pub min_p: Option<f32>,
    #[arg(long, help = default_help("Penalise tokens among the last --repeat-last-n (1: off)", |p| p.repeat_penalty))]
    pub repeat_penalty: Option<f32>,
    #[arg(long, help = default_help(&format!("How many recent tokens the repetition penalty looks at (at most {})", tandem_engine::sampling::MAX_REPEAT_LAST_N), |p| p.repeat_last_n))]
    pub repeat_last_n: Option<u32>,
    /// Random seed [default: from the clock]
    #[arg(long)]
    pub seed: Option<u64>,
}

/// A flag's help with its defaults, read from the engine: "[default: the model's, else X]", or
/// "X for raw text, Y in a chat" where the two differ.
fn default_help<T: std::fmt::Display + PartialEq>(
    what: &str,
    f: impl Fn(&SamplerParams) -> T,
) -> String {
    let (text, chat) = (
        f(&SamplerParams::defaults(Mode::Text)),
        f(&SamplerParams::defaults(Mode::Chat)),
    );
    if text == chat {
        format!("{what} [default: the model's recommendation, else {text}]")
    } else {
        format!("{what} [default: the model's recommendation, else {text} for raw text and {chat} in a chat]")
    }
}

impl SamplingArgs {
    /// What the user chose.
    pub fn choice(&self) -> Sampling {
        Sampling {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: self.repeat_last_n,
            seed: self.seed,
        }
    }

    /// The sampler settings: the user's, else the model's `recommended`, else `mode`'s
    /// defaults; the seed from the clock when none was given.
    pub fn params(&self, recommended: &Sampling, mode: Mode) -> SamplerParams {
        sampler_params(self.choice(), recommended, mode)
    }
}

/// `choice`, else the model's `recommended`, else `mode`'s defaults; the seed from the clock
/// when none was given.
pub fn sampler_params(choice: Sampling, recommended: &Sampling, mode: Mode) -> SamplerParams {
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let clock = Sampling {
        seed: Some(clock),
        ..Default::default()
    };
    choice
        .or(recommended.clone())
        .or(clock)
        .over(SamplerParams::defaults(mode))
}
