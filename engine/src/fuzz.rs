//! The bodies of the fuzz targets: one function per target, called by both the libFuzzer targets in
//! `fuzz/fuzz_targets/` and the regression test `tests/fuzz_corpus.rs`, which feeds them every
//! committed corpus input and crasher on stable Rust. Keeping the bodies here, in the engine,
//! means the two cannot drift apart and the test runs in every `cargo test` without cargo-fuzz.
//!
//! Each function takes arbitrary bytes and exercises one input-driven path of the engine. Bad
//! input must come back as an `Err`; these functions panic only when the engine breaks a promise:
//! a panic inside the engine, or an invariant of a successful result checked with `assert!` here
//! (the oracle of the fuzzer). They allocate nothing from the input beyond what the engine does.

use crate::gguf::Gguf;
use crate::model::Config;
use crate::sampling::Sampling;
use crate::tokenizer::{ChatMessage, ChatTemplate, TextStream, Tokenizer};

/// Text every fuzzed tokenizer encodes: ASCII, digits, whitespace runs, multi-byte UTF-8, and the
/// special-token spellings of common models.
const SAMPLE_TEXT: &str = "Hello, world! It's 2024: 12345 tokens.\n\n\t  x <|im_start|>user\n\
    héllo 日本語 🙂 <s></s><bos><end_of_turn>\u{0}";

/// Most token texts appended to [`SAMPLE_TEXT`] from the vocabulary under test.
const VOCAB_SAMPLE: usize = 32;

/// Target `gguf`: parses `data` as a whole GGUF file, then reads what a loader reads from the
/// header: every tensor's data, every metadata value (typed and displayed), the model config and
/// the recommended sampling.
pub fn gguf(data: &[u8]) {
    let Ok(g) = Gguf::parse(&data) else {
        return;
    };
    let file_len = data.len() as u64;
    assert!(g.alignment.is_power_of_two(), "alignment {}", g.alignment);
    for t in &g.tensors {
        let end = t.offset.checked_add(t.n_bytes);
        assert!(
            end.is_some_and(|e| e <= file_len),
            "tensor {} at {} + {} is past the file's {file_len} bytes",
            t.name,
            t.offset,
            t.n_bytes
        );
        assert!(
            g.tensor(&t.name)
                .is_some_and(|found| std::ptr::eq(found, t)),
            "lookup of tensor {:?}",
            t.name
        );
        if let Ok(bytes) = g.tensor_data(&data, t) {
            assert_eq!(bytes.len() as u64, t.n_bytes, "tensor {}", t.name);
        }
    }
    for (key, value) in &g.metadata {
        assert!(
            g.get(key).is_some_and(|found| std::ptr::eq(found, value)),
            "lookup of metadata {key:?}"
        );
        let _ = value.to_string();
        let _ = (g.opt_u64(key), g.opt_u32(key), g.opt_f32(key));
        let _ = (g.opt_bool(key), g.opt_str(key), g.opt_array(key));
    }
    let _ = g.architecture();
    let _ = Config::from_gguf(&g);
    let _ = Sampling::from_gguf(&g);
}

/// Target `tokenizer`: parses `data` as a GGUF file, builds the tokenizer from its metadata, then
/// encodes a sample text (with the first token texts of the vocabulary appended), decodes the ids
/// at once and streamed, and compiles the chat template if the metadata has one.
pub fn tokenizer(data: &[u8]) {
    let Ok(g) = Gguf::parse(&data) else {
        return;
    };
    let Ok(tok) = Tokenizer::from_gguf(&g) else {
        return;
    };
    let n = tok.vocab_size();
    assert!(n > 0);
    let mut text = String::from(SAMPLE_TEXT);
    for id in 0..n.min(VOCAB_SAMPLE) as u32 {
        text.push_str(tok.token_text(id).unwrap_or_default());
    }
    for (add_special, parse_special) in [(true, true), (false, false)] {
        let Ok(ids) = tok.encode(&text, add_special, parse_special) else {
            continue;
        };
        for &id in &ids {
            assert!((id as usize) < n, "encode gave id {id} of {n} tokens");
        }
        let _ = tok.decode(&ids);
        let _ = tok.decode_with(&ids, true);
        let mut stream = TextStream::new();
        for &id in &ids {
            let _ = stream.push(&tok, id);
        }
        let _ = stream.finish();
    }
    // Ids outside the vocabulary decode to nothing rather than panicking.
    let _ = tok.decode(&[n as u32, u32::MAX]);
    for id in [
        tok.bos(),
        tok.eos(),
        tok.eot(),
        tok.eom(),
        tok.pad(),
        tok.unk(),
    ]
    .into_iter()
    .flatten()
    {
        assert!((id as usize) < n, "special id {id} of {n} tokens");
    }
    if let Some(Ok(t)) = tok.chat_template_renderer() {
        let _ = t.render(&[ChatMessage::new("user", "Hi")], true);
    }
}

/// Target `chat_template`: `data` as UTF-8 (lossy) split at NUL characters: the first part is the
/// template's source, each later part a message, `role\u{1}content`, or plain content whose role
/// alternates user and assistant. The template is compiled with a fixed date and rendered with and
/// without the generation prompt.
pub fn chat_template(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\0');
    let source = parts.next().unwrap_or_default();
    let messages: Vec<ChatMessage> = parts
        .enumerate()
        .map(|(i, p)| match p.split_once('\u{1}') {
            Some((role, content)) => ChatMessage::new(role, content),
            None => ChatMessage::new(if i % 2 == 0 { "user" } else { "assistant" }, p),
        })
        .collect();
    let Ok(t) = ChatTemplate::with_date(source, "<s>", "</s>", (2024, 7, 26)) else {
        return;
    };
    let _ = t.render(&messages, true);
    let _ = t.render(&messages, false);
}
