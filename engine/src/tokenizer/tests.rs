use super::*;
use std::path::PathBuf;

// ---------------------------------------------------------------------------------------------
// Golden tests against Hugging Face transformers (tests/reference/make_tokenizer_golden.py).
// ---------------------------------------------------------------------------------------------

fn model_path(file: &str) -> PathBuf {
    let dir = std::env::var_os("TANDEM_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache/tandem/models")
        });
    let p = dir.join(file);
    if !p.exists() {
        panic!(
            "{} is missing: run scripts/fetch-models.sh --all (or set TANDEM_MODEL_DIR)",
            p.display()
        );
    }
    p
}

fn load(file: &str) -> Tokenizer {
    let path = model_path(file);
    let src = crate::gguf::MmapSource::open(&path).expect("open model");
    let g = Gguf::parse(&src).expect("parse GGUF");
    let t0 = std::time::Instant::now();
    let tok = Tokenizer::from_gguf(&g).expect("build tokenizer");
    eprintln!("{file}: tokenizer built in {:?}", t0.elapsed());
    tok
}

fn golden(name: &str) -> serde_json::Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/golden")
        .join(format!("tokenizer_{name}.json"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("golden JSON")
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .expect("id array")
        .iter()
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

fn check_golden(tok: &Tokenizer, name: &str) {
    let g = golden(name);
    let mut failures = Vec::new();
    for case in g["texts"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let want = ids(&case["ids_with_special"]);
        let got = tok.encode(text, true, true).unwrap();
        if got != want {
            failures.push(format!(
                "{text:?} (add_special)\n  want {want:?}\n  got  {got:?}"
            ));
        }
        let want = ids(&case["ids_no_special"]);
        let got = tok.encode(text, false, true).unwrap();
        if got != want {
            failures.push(format!("{text:?}\n  want {want:?}\n  got  {got:?}"));
        }
        let dec = tok.decode(&want);
        let want_dec = case["decoded_skip_special"].as_str().unwrap();
        if dec != want_dec {
            failures.push(format!("decode {want:?}: want {want_dec:?}, got {dec:?}"));
        }
        // Without special parsing, every text is plain text and decodes back to itself.
        let plain = tok.encode(text, false, false).unwrap();
        let back = tok.decode_with(&plain, true);
        if back != text {
            failures.push(format!("round trip {text:?}: got {back:?}"));
        }
    }
    // Where transformers' GGUF tokenizer drops the model's own pre-tokenizer (SmolLM2's digit
    // split), the golden ids come from transformers with the original pre-tokenizer restored.
    for case in g["original_pretokenizer_cases"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let text = case["text"].as_str().unwrap();
        let want = ids(&case["ids_no_special"]);
        let got = tok.encode(text, false, true).unwrap();
        if got != want {
            failures.push(format!(
                "{text:?} (original pre-tokenizer)\n  want {want:?}\n  got  {got:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{name}: {} mismatches with transformers:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn check_chats(tok: &Tokenizer, name: &str) {
    let g = golden(name);
    let tmpl = ChatTemplate::new(
        g["chat_template"].as_str().unwrap(),
        g["bos_token"].as_str().unwrap(),
        g["eos_token"].as_str().unwrap(),
    )
    .unwrap();
    for chat in g["chats"].as_array().unwrap() {
        let msgs: Vec<ChatMessage> = chat["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| ChatMessage::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
            .collect();
        let rendered = tmpl.render(&msgs, true).unwrap();
        assert_eq!(
            rendered,
            chat["rendered"].as_str().unwrap(),
            "{name}: rendering"
        );
        let got = tok.encode(&rendered, false, true).unwrap();
        assert_eq!(got, ids(&chat["ids"]), "{name}: ids of {rendered:?}");
    }
}

#[test]
fn smollm2_matches_transformers() {
    let tok = load("SmolLM2-135M-Instruct.Q4_1.gguf");
    check_golden(&tok, "smollm2");
    check_chats(&tok, "smollm2");
}

#[test]
fn smollm2_metadata() {
    let tok = load("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert_eq!(tok.vocab_size(), 49152);
    assert_eq!((tok.bos(), tok.eos()), (Some(1), Some(2)));
    assert!(!tok.add_bos());
    // <|endoftext|> (0) and <|im_end|> (2) end a generation; <|im_start|> does not.
    assert!(tok.is_end_of_generation(0) && tok.is_end_of_generation(2));
    assert!(!tok.is_end_of_generation(1) && !tok.is_end_of_generation(504));
    // The template in the GGUF is the one the golden file was made with.
    let g = golden("smollm2");
    assert_eq!(tok.chat_template(), g["chat_template"].as_str());
    let tmpl = tok.chat_template_renderer().unwrap().unwrap();
    let text = tmpl
        .render(
            &[ChatMessage::new("user", "What is the capital of France?")],
            true,
        )
        .unwrap();
    let want = ids(&g["chats"][0]["ids"]);
    assert_eq!(tok.encode(&text, false, true).unwrap(), want);
    // Byte-level pieces: "Ġ" is a space.
    let id = tok.token_id("Ġthe").unwrap();
    assert_eq!(tok.token_bytes(id), b" the");
    assert_eq!(tok.token_bytes(2), b"<|im_end|>");
    assert_eq!(tok.decode(&[1, id, 2]), " the");
    assert_eq!(
        tok.decode_with(&[1, id, 2], true),
        "<|im_start|> the<|im_end|>"
    );
}

#[test]
fn gemma3_matches_transformers() {
    let tok = load("gemma-3-270m-Q4_K_M.gguf");
    check_golden(&tok, "gemma3");
    check_chats(&tok, "gemma3");
}

#[test]
fn gemma3_metadata() {
    let tok = load("gemma-3-270m-Q4_K_M.gguf");
    assert_eq!(tok.vocab_size(), 262144);
    assert_eq!((tok.bos(), tok.eos()), (Some(2), Some(1)));
    assert!(tok.add_bos());
    assert_eq!(tok.chat_template(), None);
    // <eos> and <end_of_turn> end a generation.
    assert!(tok.is_end_of_generation(1) && tok.is_end_of_generation(106));
    assert!(!tok.is_end_of_generation(105));
    assert_eq!(tok.eot(), Some(106));
    // Byte tokens and ▁.
    assert_eq!(tok.token_bytes(tok.token_id("<0x0A>").unwrap()), b"\n");
    assert_eq!(tok.token_bytes(tok.token_id("▁the").unwrap()), b" the");
    // "é" split over byte tokens streams as one character.
    let ids = tok.encode("日本 🎉 é", false, false).unwrap();
    let mut s = TextStream::new();
    let mut out = String::new();
    for &id in &ids {
        out += &s.push(&tok, id);
    }
    out += &s.finish();
    assert_eq!(out, "日本 🎉 é");
}

// ---------------------------------------------------------------------------------------------
// Small hand-made vocabularies.
// ---------------------------------------------------------------------------------------------

/// A byte-level BPE vocabulary: the 256 byte characters, then `extra`.
fn bpe_tok(extra: &[&str], merges: &[&str], specials: &[&str]) -> Tokenizer {
    bpe_tok_pre("gpt2", extra, merges, specials)
}

fn bpe_tok_pre(pre: &str, extra: &[&str], merges: &[&str], specials: &[&str]) -> Tokenizer {
    let table = bpe::char_to_byte_table();
    let mut byte_chars = vec![String::new(); 256];
    for (cp, &b) in table.iter().enumerate() {
        if b >= 0 {
            byte_chars[b as usize] = char::from_u32(cp as u32).unwrap().to_string();
        }
    }
    let mut tokens: Vec<String> = byte_chars;
    let mut types = vec![token_type::NORMAL; 256];
    for e in extra {
        tokens.push(e.to_string());
        types.push(token_type::NORMAL);
    }
    for s in specials {
        tokens.push(s.to_string());
        types.push(token_type::CONTROL);
    }
    Tokenizer::from_config(TokenizerConfig {
        model: "gpt2".into(),
        pre: Some(pre.into()),
        tokens,
        token_type: types,
        merges: merges.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    })
    .unwrap()
}

fn texts(tok: &Tokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter()
        .map(|&i| tok.token_text(i).unwrap().to_owned())
        .collect()
}

#[test]
fn bpe_merges_follow_rank() {
    let tok = bpe_tok(&["ab", "bc", "abc"], &["a b", "b c", "ab c"], &[]);
    let ids = tok.encode("abc", false, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["abc"]);
    // With "b c" ranked first, "abc" becomes a + bc and no merge joins those.
    let tok = bpe_tok(&["ab", "bc", "abc"], &["b c", "a b", "ab c"], &[]);
    let ids = tok.encode("abc", false, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["a", "bc"]);
    // Ties go left: "aaa" with "a a" -> aa + a.
    let tok = bpe_tok(&["aa"], &["a a"], &[]);
    let ids = tok.encode("aaa", false, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["aa", "a"]);
}

#[test]
fn bpe_pretokenizer_and_bytes() {
    let tok = bpe_tok(&["Ġw", "Ġwo"], &["Ġ w", "Ġw o"], &["<|end|>"]);
    // " wo" is one pre-token, so the space joins the word.
    let ids = tok.encode("a wo", false, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["a", "Ġwo"]);
    // Non-ASCII goes through the byte mapping and back.
    let ids = tok.encode("é\n", false, false).unwrap();
    assert_eq!(ids.len(), 3);
    assert_eq!(tok.decode(&ids), "é\n");
    // Special tokens only with parse_special; they are skipped when decoding.
    let end = tok.token_id("<|end|>").unwrap();
    assert_eq!(
        tok.encode("a<|end|>", false, true).unwrap().last(),
        Some(&end)
    );
    assert!(!tok.encode("a<|end|>", false, false).unwrap().contains(&end));
    assert!(tok.is_end_of_generation(end));
    assert_eq!(
        tok.decode(&tok.encode("a<|end|>b", false, true).unwrap()),
        "ab"
    );
}

#[test]
fn every_pre_tokenizer_compiles_and_round_trips() {
    let text = "Hello  world's 12345!\n\n\tcafé 日本 🎉  ";
    for pre in [
        "default",
        "gpt2",
        "llama-bpe",
        "llama3",
        "qwen2",
        "smollm",
        "starcoder",
        "dbrx",
    ] {
        let tok = bpe_tok_pre(pre, &[], &[], &[]);
        let ids = tok.encode(text, true, true).unwrap();
        assert_eq!(tok.decode(&ids), text, "pre {pre}");
    }
    // llama3 adds BOS by default.
    assert!(bpe_tok_pre("llama-bpe", &[], &[], &[]).add_bos());
}

#[test]
fn pre_tokenizer_pieces() {
    let pieces = |pre: &str, text: &str| -> Vec<String> {
        let tok = bpe_tok_pre(pre, &[], &[], &[]);
        let Model::Bpe(m) = &tok.model else {
            unreachable!()
        };
        m.split(text)
            .unwrap()
            .into_iter()
            .map(|(s, e)| text[s..e].to_owned())
            .collect()
    };
    let text = "I'm  at 12345\n\n ok";
    assert_eq!(
        pieces("gpt2", text),
        ["I", "'m", " ", " at", " 12345", "\n\n", " ok"]
    );
    assert_eq!(
        pieces("smollm", text),
        ["I", "'m", " ", " at", " ", "1", "2", "3", "4", "5", "\n\n", " ok"]
    );
    assert_eq!(
        pieces("llama-bpe", text),
        ["I", "'m", " ", " at", " ", "123", "45", "\n\n", " ok"]
    );
    assert_eq!(
        pieces("qwen2", text),
        ["I", "'m", " ", " at", " ", "1", "2", "3", "4", "5", "\n\n", " ok"]
    );
}

#[test]
fn special_tokens_longest_match() {
    let tok = bpe_tok(&[], &[], &["<|a|>", "<|a|><|b|>", "<|b|>"]);
    let id = |s| tok.token_id(s).unwrap();
    let got = tok.encode("x<|a|><|b|><|b|>", false, true).unwrap();
    assert_eq!(got[1..], [id("<|a|><|b|>"), id("<|b|>")]);
}

/// A SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens, then (piece, score).
fn spm_tok(pieces: &[(&str, f32)], add_space_prefix: bool) -> Tokenizer {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![
        token_type::UNKNOWN,
        token_type::CONTROL,
        token_type::CONTROL,
    ];
    let mut scores = vec![0.0; 3];
    for b in 0..256 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(token_type::BYTE);
        scores.push(0.0);
    }
    for (p, s) in pieces {
        tokens.push(p.to_string());
        types.push(token_type::NORMAL);
        scores.push(*s);
    }
    Tokenizer::from_config(TokenizerConfig {
        model: "llama".into(),
        tokens,
        scores,
        token_type: types,
        bos: Some(1),
        eos: Some(2),
        unk: Some(0),
        add_space_prefix: Some(add_space_prefix),
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn spm_merges_by_score_and_falls_back_to_bytes() {
    let pieces = [
        ("▁", -1.0),
        ("a", -2.0),
        ("b", -2.0),
        ("c", -2.0),
        ("ab", -5.0),
        ("bc", -3.0),
        ("▁a", -4.0),
    ];
    let tok = spm_tok(&pieces, false);
    // "bc" scores higher than "ab", so a + bc.
    let ids = tok.encode("abc", false, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["a", "bc"]);
    // "é" has no piece: its two UTF-8 bytes as byte tokens.
    let ids = tok.encode("é a", true, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["<s>", "<0xC3>", "<0xA9>", "▁a"]);
    assert_eq!(tok.decode(&ids), "é a");
    // A space prefix is added to the text and removed when decoding.
    let tok = spm_tok(&pieces, true);
    let ids = tok.encode("a", true, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["<s>", "▁a"]);
    assert_eq!(tok.decode(&ids), "a");
}

#[test]
fn text_stream_holds_back_split_characters() {
    let tok = spm_tok(&[("▁", -1.0), ("a", -1.0)], false);
    let byte = |b: u8| tok.token_id(&format!("<0x{b:02X}>")).unwrap();
    let a = tok.token_id("a").unwrap();
    let mut s = TextStream::new();
    // 🎉 is F0 9F 8E 89.
    assert_eq!(s.push(&tok, a), "a");
    assert_eq!(s.push(&tok, byte(0xF0)), "");
    assert_eq!(s.push(&tok, byte(0x9F)), "");
    assert_eq!(s.push(&tok, byte(0x8E)), "");
    assert_eq!(s.push(&tok, byte(0x89)), "🎉");
    // Control tokens are skipped.
    assert_eq!(s.push(&tok, 2), "");
    // An invalid byte is replaced, the character after it is kept.
    assert_eq!(s.push(&tok, byte(0xFF)), "\u{FFFD}");
    assert_eq!(s.push(&tok, byte(0xC3)), "");
    assert!(s.has_pending());
    assert_eq!(s.finish(), "\u{FFFD}");
    assert_eq!(s.push(&tok, a), "a");
}

#[test]
fn rejects_bad_configs() {
    let cfg = TokenizerConfig {
        model: "wordpiece".into(),
        tokens: vec!["a".into()],
        ..Default::default()
    };
    assert!(matches!(
        Tokenizer::from_config(cfg),
        Err(Error::Tokenizer(_))
    ));
    let cfg = TokenizerConfig {
        model: "gpt2".into(),
        pre: Some("no-such-pre".into()),
        tokens: vec!["a".into()],
        ..Default::default()
    };
    assert!(matches!(
        Tokenizer::from_config(cfg),
        Err(Error::Tokenizer(_))
    ));
    let cfg = TokenizerConfig {
        model: "llama".into(),
        tokens: vec!["a".into()],
        eos: Some(7),
        ..Default::default()
    };
    assert!(matches!(
        Tokenizer::from_config(cfg),
        Err(Error::Tokenizer(_))
    ));
}

// ---------------------------------------------------------------------------------------------
// Chat templates.
// ---------------------------------------------------------------------------------------------

#[test]
fn chat_template_python_compat() {
    let src = "{{ bos_token }}{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}{% endif %}\
        {{ m.content.strip() | upper if m.content.startswith(' ') else m.content }}|{% endfor %}\
        {{ {'b': 1, 'a': [1, 'é<']} | tojson }}{% if add_generation_prompt %}>{% endif %}";
    let t = ChatTemplate::new(src, "<s>", "</s>").unwrap();
    let out = t
        .render(
            &[
                ChatMessage::new("user", "  hi "),
                ChatMessage::new("assistant", "yo"),
            ],
            true,
        )
        .unwrap();
    assert_eq!(out, "<s>HI|yo|{\"b\": 1, \"a\": [1, \"é<\"]}>");
    let err = t
        .render(&[ChatMessage::new("system", "x")], false)
        .unwrap_err();
    assert!(
        matches!(&err, Error::Template(m) if m.contains("no system")),
        "{err}"
    );
    assert!(matches!(
        ChatTemplate::new("{% if %}", "", ""),
        Err(Error::Template(_))
    ));
}

#[test]
fn chat_template_trims_blocks_like_jinja2() {
    // trim_blocks + lstrip_blocks, as transformers compiles templates.
    let src = "{% for m in messages %}\n    {% if true %}\n{{ m.content }}\n    {% endif %}\n{% endfor %}";
    let t = ChatTemplate::new(src, "", "").unwrap();
    let out = t.render(&[ChatMessage::new("user", "a")], false).unwrap();
    assert_eq!(out, "a\n");
}
