//! What a tokenizer is built from: the `tokenizer.*` keys of a GGUF file, as plain data.

use crate::error::{Error, Result};
use crate::gguf::Gguf;

/// Token types as GGUF stores them in `tokenizer.ggml.token_type` (llama.cpp's `llama_token_type`).
pub mod token_type {
    pub const NORMAL: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
    pub const UNUSED: i32 = 5;
    pub const BYTE: i32 = 6;
}

/// Everything a tokenizer is built from: the `tokenizer.*` keys of a GGUF file, as plain data.
#[derive(Clone, Debug, Default)]
pub struct TokenizerConfig {
    /// `tokenizer.ggml.model`: "gpt2" (byte-level BPE) or "llama" (SentencePiece).
    pub model: String,
    /// `tokenizer.ggml.pre`: the pre-tokenizer of a BPE model ("smollm", "llama-bpe", "qwen2"...).
    pub pre: Option<String>,
    pub tokens: Vec<String>,
    /// Per token; used by SentencePiece. Empty: all 0.
    pub scores: Vec<f32>,
    /// Per token, see [`token_type`]. Empty: all normal.
    pub token_type: Vec<i32>,
    /// BPE merges, "left right", best first.
    pub merges: Vec<String>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub pad: Option<u32>,
    pub unk: Option<u32>,
    /// `None`: the model kind's default (SentencePiece: true, BPE: false, llama3 BPE: true).
    pub add_bos: Option<bool>,
    pub add_eos: Option<bool>,
    /// `None`: the model kind's default (SentencePiece: true, BPE: false).
    pub add_space_prefix: Option<bool>,
    pub chat_template: Option<String>,
}

impl TokenizerConfig {
    /// Reads the standard `tokenizer.*` keys.
    pub fn from_gguf(g: &Gguf) -> Result<TokenizerConfig> {
        let strings = |key: &str| -> Result<Vec<String>> {
            match g.opt_array(key)? {
                None => Ok(Vec::new()),
                Some(a) => a
                    .iter()
                    .map(|v| {
                        v.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| Error::MetadataType {
                                key: key.into(),
                                expected: "array of strings",
                            })
                    })
                    .collect(),
            }
        };
        let tokens = strings("tokenizer.ggml.tokens")?;
        if tokens.is_empty() {
            return Err(Error::Tokenizer(
                "the model has no vocabulary (tokenizer.ggml.tokens is missing or empty)".into(),
            ));
        }
        let scores = match g.opt_array("tokenizer.ggml.scores")? {
            None => Vec::new(),
            Some(a) => a
                .iter()
                .map(|v| {
                    v.as_f32().ok_or(Error::MetadataType {
                        key: "tokenizer.ggml.scores".into(),
                        expected: "array of numbers",
                    })
                })
                .collect::<Result<_>>()?,
        };
        let token_type = match g.opt_array("tokenizer.ggml.token_type")? {
            None => Vec::new(),
            Some(a) => a
                .iter()
                .map(|v| {
                    v.as_i64().map(|x| x as i32).ok_or(Error::MetadataType {
                        key: "tokenizer.ggml.token_type".into(),
                        expected: "array of integers",
                    })
                })
                .collect::<Result<_>>()?,
        };
        Ok(TokenizerConfig {
            model: g.req_str("tokenizer.ggml.model")?.to_owned(),
            pre: g.opt_str("tokenizer.ggml.pre")?.map(str::to_owned),
            tokens,
            scores,
            token_type,
            merges: strings("tokenizer.ggml.merges")?,
            bos: g.opt_u32("tokenizer.ggml.bos_token_id")?,
            eos: g.opt_u32("tokenizer.ggml.eos_token_id")?,
            eot: g.opt_u32("tokenizer.ggml.eot_token_id")?,
            eom: g.opt_u32("tokenizer.ggml.eom_token_id")?,
            pad: g.opt_u32("tokenizer.ggml.padding_token_id")?,
            unk: g.opt_u32("tokenizer.ggml.unknown_token_id")?,
            add_bos: g.opt_bool("tokenizer.ggml.add_bos_token")?,
            add_eos: g.opt_bool("tokenizer.ggml.add_eos_token")?,
            add_space_prefix: g.opt_bool("tokenizer.ggml.add_space_prefix")?,
            chat_template: g.opt_str("tokenizer.chat_template")?.map(str::to_owned),
        })
    }
}
