//! What the wasm engine and the npm package agree on, written once: the error codes, the chat
//! options, defaults and result, the model cache's name. The package's `npm/src/contract.ts` is
//! generated from this file ([`typescript`]); the test `contract_ts_is_current` fails while the
//! two differ, and `TANDEM_BLESS=1 cargo test -p tandem-web` rewrites it.
//!
//! The sampling defaults themselves are the engine's ([`SamplerParams::chat`]); this file only
//! carries them to TypeScript. Compiled natively too, so that its tests run without a browser.

use serde::{Deserialize, Serialize};
use tandem_engine::generate::GenerateOptions;
use tandem_engine::sampling::{shortest_f64, SamplerParams, Sampling};
use tandem_engine::Error;

/// The Cache API cache the package keeps fetched models in.
pub const CACHE_NAME: &str = "tandem-models";

macro_rules! error_codes {
    ($($variant:ident = $code:literal : $doc:literal,)*) => {
        /// The `code` of every error the package throws (a `TandemError`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum ErrorCode { $($variant,)* }

        impl ErrorCode {
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];
            pub fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $code,)* }
            }
            pub fn doc(self) -> &'static str {
                match self { $(ErrorCode::$variant => $doc,)* }
            }
        }
    };
}

error_codes! {
    NoWebgpu = "no_webgpu": "The browser has no WebGPU, or no adapter.",
    MissingFeature = "missing_feature": "Reserved: the engine needs no optional WebGPU feature today.",
    ModelTooLarge = "model_too_large": "The model needs more than the adapter's limits allow.",
    UnsupportedModel = "unsupported_model": "An architecture, tensor type or metadata key Tandem does not support.",
    BadGguf = "bad_gguf": "The file is not a valid GGUF (or is truncated).",
    DeviceLost = "device_lost": "The GPU device was lost.",
    GpuError = "gpu_error": "A WebGPU error (a shader, a buffer).",
    ContextOverflow = "context_overflow": "The conversation does not fit in the context.",
    TemplateError = "template_error": "The tokenizer or the chat template failed, or the model has none.",
    InvalidArgument = "invalid_argument": "An argument of the call is wrong.",
    Io = "io": "Reading the model failed.",
    Busy = "busy": "The engine runs another request (one at a time).",
    NoModel = "no_model": "No model is loaded.",
    Network = "network": "Fetching the model failed (thrown by the package).",
    Aborted = "aborted": "The request was aborted (thrown by the package).",
    EngineError = "engine_error": "Anything else.",
}

impl ErrorCode {
    /// The code of an engine error.
    pub fn of(e: &Error) -> ErrorCode {
        match e {
            Error::NoAdapter(_) => ErrorCode::NoWebgpu,
            Error::Limits { .. } => ErrorCode::ModelTooLarge,
            Error::UnsupportedTensorType { .. }
            | Error::UnsupportedArchitecture(_)
            | Error::MissingMetadata { .. } => ErrorCode::UnsupportedModel,
            Error::BadMagic { .. }
            | Error::UnsupportedVersion(_)
            | Error::Truncated { .. }
            | Error::Corrupt(_)
            | Error::MetadataType { .. }
            | Error::MissingTensor(_)
            | Error::TensorShape { .. } => ErrorCode::BadGguf,
            Error::DeviceLost(_) => ErrorCode::DeviceLost,
            Error::Gpu(_) | Error::Shader { .. } => ErrorCode::GpuError,
            Error::ContextOverflow { .. } => ErrorCode::ContextOverflow,
            Error::Tokenizer(_) | Error::Template(_) => ErrorCode::TemplateError,
            Error::Io { .. } => ErrorCode::Io,
            Error::InvalidArgument(_) => ErrorCode::InvalidArgument,
            #[allow(unreachable_patterns)]
            _ => ErrorCode::EngineError,
        }
    }
}

/// A chat turn's options; each one left out comes from [`ChatDefaults::for_model`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChatOptions {
    pub max_tokens: Option<usize>,
    pub temperature: Option<f32>,
    pub top_k: Option<u32>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub repeat_penalty: Option<f32>,
    pub repeat_last_n: Option<u32>,
    /// A JS number (integers up to 2^53 are exact).
    pub seed: Option<f64>,
    /// Default: MTP where the model has an MTP layer.
    pub speculative: Option<Speculative>,
    pub draft_max: Option<usize>,
}

/// Multi-token prediction for a turn: drafts from the model's MTP layer, verified in one pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Speculative {
    Mtp,
    Off,
}

impl ChatOptions {
    const FIELDS: &'static [(&'static str, &'static str, &'static str)] = &[
        ("max_tokens", "number", "Most tokens to generate."),
        ("temperature", "number", "0: greedy (argmax)."),
        (
            "top_k",
            "number",
            "Keep the K most likely tokens (at most 64 on the GPU; 0: 64).",
        ),
        (
            "top_p",
            "number",
            "Keep the most likely tokens whose probabilities add up to P.",
        ),
        (
            "min_p",
            "number",
            "Drop tokens less likely than P times the most likely one.",
        ),
        (
            "repeat_penalty",
            "number",
            "Penalise the last repeat_last_n tokens (1: off).",
        ),
        (
            "repeat_last_n",
            "number",
            "How many recent tokens the penalty looks at.",
        ),
        ("seed", "number", "Random seed (default: random)."),
        (
            "speculative",
            "\"mtp\" | \"off\"",
            "\"mtp\": draft tokens with the model's MTP layer and verify them in one pass (greedy output unchanged; the default where the model has one). \"off\": one token a pass.",
        ),
        (
            "draft_max",
            "number",
            "Most draft tokens a step (default 4; the length adapts to the acceptance).",
        ),
    ];

    /// The user's sampling choices.
    pub fn sampling(&self) -> Sampling {
        Sampling {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: self.repeat_last_n,
            seed: self.seed.map(|s| s as u64),
        }
    }
}

/// What a chat turn uses where [`ChatOptions`] leave something out (as JS numbers: 0.95, not
/// the f32's 0.949999988079071).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChatDefaults {
    pub max_tokens: usize,
    pub temperature: f64,
    pub top_k: u32,
    pub top_p: f64,
    pub min_p: f64,
    pub repeat_penalty: f64,
    pub repeat_last_n: u32,
}

impl ChatDefaults {
    /// The engine's chat defaults (a model that recommends a sampling gets
    /// [`ChatDefaults::for_model`]).
    pub fn engine() -> ChatDefaults {
        ChatDefaults::for_model(&Sampling::default())
    }

    /// The chat defaults with the model's `recommended` sampling (its GGUF's) over the engine's.
    pub fn for_model(recommended: &Sampling) -> ChatDefaults {
        let p = recommended.over(SamplerParams::chat());
        ChatDefaults {
            max_tokens: GenerateOptions::default().max_tokens,
            temperature: shortest_f64(p.temperature),
            top_k: p.top_k,
            top_p: shortest_f64(p.top_p),
            min_p: shortest_f64(p.min_p),
            repeat_penalty: shortest_f64(p.repeat_penalty),
            repeat_last_n: p.repeat_last_n,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FinishReason {
    /// An end-of-generation token (or a stop string, seen by the package).
    #[default]
    Stop,
    /// max_tokens or the context ran out.
    Length,
    /// `stop()` was called.
    Abort,
}

impl FinishReason {
    const ALL: &'static [FinishReason] = &[
        FinishReason::Stop,
        FinishReason::Length,
        FinishReason::Abort,
    ];
}

/// What `Engine.chat` and `Engine.complete` resolve to.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ChatResult {
    pub text: String,
    pub finish_reason: FinishReason,
    pub prompt_tokens: usize,
    pub prefilled_tokens: usize,
    pub completion_tokens: usize,
    pub prefill_seconds: f64,
    pub decode_seconds: f64,
    pub prefill_tokens_per_second: f64,
    pub decode_tokens_per_second: f64,
    pub draft_tokens: usize,
    pub accepted_tokens: usize,
    pub acceptance_rate: f64,
    pub tokens_per_pass: f64,
    pub plain_tokens: usize,
}

impl ChatResult {
    const FIELDS: &'static [(&'static str, &'static str, &'static str)] = &[
        ("text", "string", "The answer."),
        ("finish_reason", "FinishReason", ""),
        (
            "prompt_tokens",
            "number",
            "Tokens of the rendered conversation.",
        ),
        (
            "prefilled_tokens",
            "number",
            "Prompt tokens actually run (the rest came from the cached prefix).",
        ),
        (
            "completion_tokens",
            "number",
            "Generated tokens, the end-of-generation token not counted.",
        ),
        ("prefill_seconds", "number", ""),
        ("decode_seconds", "number", ""),
        ("prefill_tokens_per_second", "number", ""),
        ("decode_tokens_per_second", "number", ""),
        (
            "draft_tokens",
            "number",
            "Tokens the MTP layer drafted (0 without speculation).",
        ),
        (
            "accepted_tokens",
            "number",
            "Of them, the tokens the model agreed with.",
        ),
        (
            "acceptance_rate",
            "number",
            "accepted_tokens / draft_tokens.",
        ),
        (
            "tokens_per_pass",
            "number",
            "Tokens each verification pass yielded (0 without speculation).",
        ),
        (
            "plain_tokens",
            "number",
            "Tokens made by plain decode steps, where they measured faster than speculating.",
        ),
    ];
}

const CHAT_DEFAULTS_FIELDS: &[(&str, &str, &str)] = &[
    ("max_tokens", "number", ""),
    ("temperature", "number", "0: greedy."),
    ("top_k", "number", ""),
    ("top_p", "number", ""),
    ("min_p", "number", ""),
    ("repeat_penalty", "number", ""),
    ("repeat_last_n", "number", ""),
];

fn interface(
    out: &mut String,
    name: &str,
    doc: &str,
    fields: &[(&str, &str, &str)],
    optional: bool,
) {
    out.push_str(&format!("/** {doc} */\nexport interface {name} {{\n"));
    for (field, ty, doc) in fields {
        if !doc.is_empty() {
            out.push_str(&format!("  /** {doc} */\n"));
        }
        let q = if optional { "?" } else { "" };
        out.push_str(&format!("  {field}{q}: {ty};\n"));
    }
    out.push_str("}\n\n");
}

/// The text of `npm/src/contract.ts`.
pub fn typescript() -> String {
    let mut out = String::from(
        "// Generated from web/src/contract.rs by `TANDEM_BLESS=1 cargo test -p tandem-web`: do not edit.\n\n",
    );
    out.push_str(&format!(
        "/** The Cache API cache fetched models are kept in. */\nexport const CACHE_NAME = {:?};\n\n",
        CACHE_NAME
    ));
    out.push_str(
        "/** Every error code a TandemError can carry. */\nexport const ERROR_CODES = [\n",
    );
    for c in ErrorCode::ALL {
        out.push_str(&format!("  /** {} */\n  {:?},\n", c.doc(), c.as_str()));
    }
    out.push_str("] as const;\n\nexport type ErrorCode = (typeof ERROR_CODES)[number];\n\n");
    let finish: Vec<String> = FinishReason::ALL
        .iter()
        .map(|f| serde_json::to_string(f).expect("finish reason"))
        .collect();
    out.push_str(&format!(
        "/** Why a generation ended: an end token or stop string, the token or context limit, stop(). */\nexport type FinishReason = {};\n\n",
        finish.join(" | ")
    ));
    interface(
        &mut out,
        "ChatOptions",
        "The engine's options for one chat turn; each one left out comes from the model's ChatDefaults.",
        ChatOptions::FIELDS,
        true,
    );
    interface(
        &mut out,
        "ChatDefaults",
        "What a chat turn uses where its options leave something out: the model's recommended sampling (general.sampling.* in its GGUF) over the engine's chat defaults.",
        CHAT_DEFAULTS_FIELDS,
        false,
    );
    interface(
        &mut out,
        "ChatResult",
        "What the engine's chat call resolves to.",
        ChatResult::FIELDS,
        false,
    );
    out.push_str(&format!(
        "/** The engine's chat defaults, for a model that recommends no sampling (greedy: a small model's first token is often a near tie). */\nexport const CHAT_DEFAULTS: ChatDefaults = {};\n",
        serde_json::to_string_pretty(&ChatDefaults::engine()).expect("defaults")
    ));
    out
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    fn keys<T: Serialize>(v: &T) -> Vec<String> {
        match serde_json::to_value(v).unwrap() {
            serde_json::Value::Object(m) => m.keys().cloned().collect(),
            _ => panic!("not an object"),
        }
    }

    fn names(fields: &[(&str, &str, &str)]) -> Vec<String> {
        let mut v: Vec<String> = fields.iter().map(|f| f.0.to_string()).collect();
        v.sort();
        v
    }

    /// The TypeScript field lists name exactly the fields serde writes.
    #[test]
    fn typescript_fields_match_serde() {
        assert_eq!(keys(&ChatResult::default()), names(ChatResult::FIELDS));
        assert_eq!(keys(&ChatOptions::default()), names(ChatOptions::FIELDS));
        assert_eq!(keys(&ChatDefaults::engine()), names(CHAT_DEFAULTS_FIELDS));
    }

    /// Through a serde_json::Value (as the load summary goes) the defaults keep their short form.
    #[test]
    fn chat_defaults_survive_a_json_value() {
        let v = serde_json::json!({ "chatDefaults": ChatDefaults::engine() });
        assert_eq!(v["chatDefaults"]["top_p"], serde_json::json!(0.95));
    }

    #[test]
    fn contract_ts_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("npm/src/contract.ts");
        let want = typescript();
        if std::env::var_os("TANDEM_BLESS").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{} is not what web/src/contract.rs generates: run TANDEM_BLESS=1 cargo test -p tandem-web",
            path.display()
        );
    }

    #[test]
    fn chat_options_left_out_take_the_model_defaults() {
        let o: ChatOptions = serde_json::from_str(r#"{"temperature": 0.7, "seed": 5}"#).unwrap();
        let recommended = Sampling {
            top_k: Some(20),
            temperature: Some(0.6),
            ..Default::default()
        };
        let p = o.sampling().or(recommended).over(SamplerParams::chat());
        assert_eq!((p.temperature, p.top_k, p.seed), (0.7, 20, 5));
        assert_eq!(p.top_p, SamplerParams::chat().top_p);
    }
}
