//! Fuzz target `tokenizer`: the body is [`tandem_engine::fuzz::tokenizer`], shared with the regression test
//! `tests/fuzz_corpus.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_engine::fuzz::tokenizer(data));
