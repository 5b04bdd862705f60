//! The fuzzers' findings as ordinary tests, on stable Rust and without cargo-fuzz: every input of
//! the minimized corpora (`fuzz/corpus/<target>/`) and every crasher kept as a regression input
//! (`fuzz/regressions/<target>/`) goes through the same body the fuzz target runs,
//! `tandem_engine::fuzz::<target>`. An input that panics fails the test, named.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut files = Vec::new();
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(dir).join(target)) else {
            continue;
        };
        files.extend(entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()));
    }
    files.sort();
    files
}

fn run(target: &str, body: fn(&[u8])) {
    let files = inputs(target);
    assert!(
        !files.is_empty(),
        "no inputs for fuzz target {target} under fuzz/corpus or fuzz/regressions"
    );
    let mut failed = Vec::new();
    for f in &files {
        let data = std::fs::read(f).unwrap();
        if catch_unwind(AssertUnwindSafe(|| body(&data))).is_err() {
            failed.push(f.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} inputs of fuzz target {target} panicked: {failed:#?}",
        failed.len(),
        files.len()
    );
}

#[test]
fn gguf_corpus() {
    run("gguf", tandem_engine::fuzz::gguf);
}

#[test]
fn tokenizer_corpus() {
    run("tokenizer", tandem_engine::fuzz::tokenizer);
}

#[test]
fn chat_template_corpus() {
    run("chat_template", tandem_engine::fuzz::chat_template);
}
