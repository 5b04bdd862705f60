//! Fuzz target `chat_template`: the body is [`tandem_engine::fuzz::chat_template`], shared with the regression test
//! `tests/fuzz_corpus.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_engine::fuzz::chat_template(data));
