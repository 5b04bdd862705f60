//! Text <-> token ids, built from a GGUF file's `tokenizer.*` metadata, and chat templates.
//!
//! Two tokenizer models, as llama.cpp names them in `tokenizer.ggml.model`:
//! - `gpt2`: byte-level BPE. The text is split by the pre-tokenizer regexes that llama.cpp uses for
//!   the model's `tokenizer.ggml.pre`, each piece is mapped byte -> printable char (GPT-2's
//!   `bytes_to_unicode`) and merged by merge rank.
//! - `llama`: SentencePiece BPE (Gemma, Llama 2, Mistral). Spaces become `▁`, adjacent symbols are
//!   merged by the highest vocabulary score (llama.cpp's `llm_tokenizer_spm`), and characters with
//!   no token fall back to `<0xNN>` byte tokens.
//!
//! Special tokens (control, type 3) are split out of the text first when `parse_special` is true;
//! user-defined tokens (type 4, e.g. Gemma's `"\n\n"` or `<b>`) are always split out, as llama.cpp
//! and Hugging Face do. At one position the longest token wins (Hugging Face's added-token matcher
//! is leftmost-longest).
//!
//! Decoding skips control tokens (`<|im_end|>`, `<eos>`...) and renders every other token,
//! user-defined ones as their text: this is what llama.cpp prints by default and what a chat UI
//! wants. [`Tokenizer::decode_with`] renders control tokens too.

mod bpe;
mod chat;
mod config;
mod special;
mod spm;
mod stream;
// They read the models from the model cache on disk: native only.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::gguf::Gguf;

pub use chat::{ChatMessage, ChatTemplate};
pub use config::{token_type, TokenizerConfig};
pub use stream::TextStream;

use special::SpecialMatcher;

enum Model {
    Bpe(Box<bpe::Bpe>),
    Spm(Box<spm::Spm>),
}

enum Fragment<'a> {
    Text(&'a str),
    Token(u32),
}

/// A tokenizer: encode, decode, special tokens, end-of-generation ids, chat template source.
pub struct Tokenizer {
    model: Model,
    tokens: Vec<String>,
    types: Vec<i32>,
    token_to_id: HashMap<String, u32>,
    /// Decoded bytes of every token, concatenated; token i is `pieces[piece_off[i]..piece_off[i+1]]`.
    pieces: Vec<u8>,
    piece_off: Vec<u32>,
    specials: SpecialMatcher,
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Option<u32>,
    eom: Option<u32>,
    pad: Option<u32>,
    unk: Option<u32>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    /// Sorted.
    eog: Vec<u32>,
    chat_template: Option<String>,
}

/// Token texts that end a generation (llama.cpp's `llama_vocab::impl::load`, `special_eog_ids`).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "<|end_of_text|>",
    "<end_of_utterance>",
];

/// Token texts that llama.cpp takes as end-of-turn when the metadata names none.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];

impl Tokenizer {
    /// Builds the tokenizer from a GGUF file's metadata.
    pub fn from_gguf(g: &Gguf) -> Result<Tokenizer> {
        Tokenizer::from_config(TokenizerConfig::from_gguf(g)?)
    }

    pub fn from_config(cfg: TokenizerConfig) -> Result<Tokenizer> {
        let n = cfg.tokens.len();
        if n == 0 {
            return Err(Error::Tokenizer("the vocabulary is empty".into()));
        }
        if n > u32::MAX as usize / 2 {
            return Err(Error::Tokenizer(format!("the vocabulary has {n} tokens")));
        }
        if !cfg.scores.is_empty() && cfg.scores.len() != n {
            return Err(Error::Tokenizer(format!(
                "tokenizer.ggml.scores has {} entries for {n} tokens",
                cfg.scores.len()
            )));
        }
        if !cfg.token_type.is_empty() && cfg.token_type.len() != n {
            return Err(Error::Tokenizer(format!(
                "tokenizer.ggml.token_type has {} entries for {n} tokens",
                cfg.token_type.len()
            )));
        }
        let check_id = |name: &str, id: Option<u32>| -> Result<Option<u32>> {
            match id {
                Some(i) if i as usize >= n => Err(Error::Tokenizer(format!(
                    "the {name} token id {i} is outside the vocabulary of {n} tokens"
                ))),
                _ => Ok(id),
            }
        };
        let bos = check_id("BOS", cfg.bos)?;
        let eos = check_id("EOS", cfg.eos)?;
        let mut eot = check_id("EOT", cfg.eot)?;
        let eom = check_id("EOM", cfg.eom)?;
        let pad = check_id("padding", cfg.pad)?;
        let unk = check_id("unknown", cfg.unk)?;

        let mut types = if cfg.token_type.is_empty() {
            vec![token_type::NORMAL; n]
        } else {
            cfg.token_type
        };
        let mut token_to_id = HashMap::with_capacity(n);
        for (i, t) in cfg.tokens.iter().enumerate() {
            token_to_id.entry(t.clone()).or_insert(i as u32);
        }

        // End of generation, as llama.cpp decides it; such tokens are made control tokens.
        let mut eog = Vec::new();
        if eot.is_none() {
            eot = EOT_TEXTS.iter().find_map(|t| token_to_id.get(*t).copied());
        }
        for t in EOG_TEXTS {
            if let Some(&id) = token_to_id.get(*t) {
                eog.push(id);
                types[id as usize] = token_type::CONTROL;
            }
        }
        eog.extend([eos, eot, eom].into_iter().flatten());
        eog.sort_unstable();
        eog.dedup();

        let (model, default_bos, default_space) = match cfg.model.as_str() {
            "gpt2" => {
                let pre = cfg.pre.as_deref().unwrap_or("default");
                let m = bpe::Bpe::new(pre, &token_to_id, &cfg.merges)?;
                let add_bos = bpe::pre_adds_bos(pre);
                (Model::Bpe(Box::new(m)), add_bos, false)
            }
            "llama" => {
                let scores = if cfg.scores.is_empty() {
                    vec![0.0; n]
                } else {
                    cfg.scores
                };
                (
                    Model::Spm(Box::new(spm::Spm::new(&cfg.tokens, &types, scores)?)),
                    true,
                    true,
                )
            }
            other => {
                return Err(Error::Tokenizer(format!(
                    "tokenizer model {other:?} is not supported; Tandem reads \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece)"
                )))
            }
        };

        let mut pieces = Vec::with_capacity(cfg.tokens.iter().map(String::len).sum());
        let mut piece_off = Vec::with_capacity(n + 1);
        let rev = bpe::char_to_byte_table();
        piece_off.push(0u32);
        for (i, t) in cfg.tokens.iter().enumerate() {
            match types[i] {
                token_type::CONTROL | token_type::USER_DEFINED | token_type::UNKNOWN => {
                    pieces.extend_from_slice(t.as_bytes())
                }
                token_type::BYTE => match spm::parse_byte_token(t) {
                    Some(b) => pieces.push(b),
                    None => pieces.extend_from_slice(t.as_bytes()),
                },
                _ => match &model {
                    Model::Bpe(_) => bpe::unmap_bytes(t, &rev, &mut pieces),
                    Model::Spm(_) => spm::unescape_into(t, &mut pieces),
                },
            }
            let off = u32::try_from(pieces.len())
                .map_err(|_| Error::Tokenizer("the vocabulary's text exceeds 4 GiB".into()))?;
            piece_off.push(off);
        }

        let is_special = |ty: i32| {
            matches!(
                ty,
                token_type::CONTROL | token_type::USER_DEFINED | token_type::UNKNOWN
            )
        };
        let specials = SpecialMatcher::new(
            cfg.tokens
                .iter()
                .enumerate()
                .filter(|&(i, _)| is_special(types[i]))
                .map(|(i, t)| (i as u32, t.clone())),
        );

        Ok(Tokenizer {
            model,
            tokens: cfg.tokens,
            types,
            token_to_id,
            pieces,
            piece_off,
            specials,
            bos,
            eos,
            eot,
            eom,
            pad,
            unk,
            add_bos: cfg.add_bos.unwrap_or(default_bos),
            add_eos: cfg.add_eos.unwrap_or(false),
            add_space_prefix: cfg.add_space_prefix.unwrap_or(default_space),
            eog,
            chat_template: cfg.chat_template,
        })
    }

    /// Text to token ids.
    ///
    /// `add_special`: add BOS (and EOS) where the model's metadata asks for them (like
    /// `add_special_tokens=True` in Hugging Face). `parse_special`: text such as `<|im_start|>`
    /// becomes that control token; when false it is tokenized as plain text (user-defined tokens
    /// are matched either way).
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            if let Some(b) = self.bos {
                out.push(b);
            }
        }
        let frags = self.split_special(text, parse_special);
        match &self.model {
            Model::Bpe(m) => {
                for f in frags {
                    match f {
                        Fragment::Token(id) => out.push(id),
                        Fragment::Text(t) => m.encode(t, &self.token_to_id, self.unk, &mut out)?,
                    }
                }
            }
            Model::Spm(m) => {
                let mut prev_special = true;
                let mut buf = String::new();
                for f in frags {
                    match f {
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                        Fragment::Text(t) => {
                            buf.clear();
                            if self.add_space_prefix && prev_special {
                                buf.push(' ');
                            }
                            buf.push_str(t);
                            m.encode(&buf, &self.token_to_id, self.unk, &mut out);
                            prev_special = false;
                        }
                    }
                }
            }
        }
        if add_special && self.add_eos {
            if let Some(e) = self.eos {
                out.push(e);
            }
        }
        Ok(out)
    }

    fn split_special<'a>(&self, text: &'a str, parse_special: bool) -> Vec<Fragment<'a>> {
        let accept = |id: u32| parse_special || self.types[id as usize] == token_type::USER_DEFINED;
        let mut frags = Vec::new();
        let mut start = 0;
        let mut i = 0;
        let bytes = text.as_bytes();
        while i < bytes.len() {
            // Only char boundaries can start a token (every token text is valid UTF-8).
            if text.is_char_boundary(i) {
                if let Some((id, len)) = self.specials.match_at(&text[i..], accept) {
                    if i > start {
                        frags.push(Fragment::Text(&text[start..i]));
                    }
                    frags.push(Fragment::Token(id));
                    i += len;
                    start = i;
                    continue;
                }
            }
            i += 1;
        }
        if start < text.len() {
            frags.push(Fragment::Text(&text[start..]));
        }
        frags
    }

    /// Token ids to text, lossy UTF-8. Control tokens (BOS, `<|im_end|>`...) are skipped; see
    /// [`Tokenizer::decode_with`].
    pub fn decode(&self, ids: &[u32]) -> String {
        self.decode_with(ids, false)
    }

    /// Token ids to text, lossy UTF-8; `render_control`: write control tokens as their text.
    pub fn decode_with(&self, ids: &[u32], render_control: bool) -> String {
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            if render_control || !self.is_control(id) {
                bytes.extend_from_slice(self.token_bytes(id));
            }
        }
        if self.strips_leading_space() && bytes.first() == Some(&b' ') {
            bytes.remove(0);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// SentencePiece models that add a space prefix remove it again when decoding.
    fn strips_leading_space(&self) -> bool {
        matches!(self.model, Model::Spm(_)) && self.add_space_prefix
    }

    /// Raw bytes of one token: byte-level BPE un-mapped, SentencePiece `▁` as space, `<0xNN>` as
    /// that byte, control and user-defined tokens as their text. Empty for an id outside the
    /// vocabulary.
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        let i = id as usize;
        if i + 1 >= self.piece_off.len() {
            return &[];
        }
        &self.pieces[self.piece_off[i] as usize..self.piece_off[i + 1] as usize]
    }

    /// The token's text as the vocabulary stores it (`Ġhello`, `▁hello`, `<|im_end|>`).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// The id of a token given its vocabulary text.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.token_to_id.get(text).copied()
    }

    /// The token's type, see [`token_type`].
    pub fn token_type(&self, id: u32) -> Option<i32> {
        self.types.get(id as usize).copied()
    }

    /// Control or unknown token: not rendered by [`Tokenizer::decode`].
    pub fn is_control(&self, id: u32) -> bool {
        matches!(
            self.types.get(id as usize),
            Some(&token_type::CONTROL) | Some(&token_type::UNKNOWN)
        )
    }

    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }
    pub fn eot(&self) -> Option<u32> {
        self.eot
    }
    pub fn eom(&self) -> Option<u32> {
        self.eom
    }
    pub fn pad(&self) -> Option<u32> {
        self.pad
    }
    pub fn unk(&self) -> Option<u32> {
        self.unk
    }
    /// Whether `encode(.., add_special = true, ..)` puts BOS first.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }

    /// Ends a generation: EOS, EOT, EOM and the end-of-turn tokens llama.cpp knows
    /// (`<|im_end|>`, `<end_of_turn>`, `<|endoftext|>`, `<|eot_id|>`...).
    pub fn is_end_of_generation(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// All end-of-generation ids, sorted.
    pub fn end_of_generation_ids(&self) -> &[u32] {
        &self.eog
    }

    /// The Jinja source of `tokenizer.chat_template`, if the model has one.
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// The model's chat template, compiled with its BOS and EOS texts. `None` if it has none.
    pub fn chat_template_renderer(&self) -> Option<Result<ChatTemplate>> {
        let src = self.chat_template.as_deref()?;
        let text = |id: Option<u32>| id.and_then(|i| self.token_text(i)).unwrap_or("");
        Some(ChatTemplate::new(src, text(self.bos), text(self.eos)))
    }
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field(
                "model",
                &match self.model {
                    Model::Bpe(_) => "bpe",
                    Model::Spm(_) => "spm",
                },
            )
            .field("vocab_size", &self.tokens.len())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("add_bos", &self.add_bos)
            .finish_non_exhaustive()
    }
}
