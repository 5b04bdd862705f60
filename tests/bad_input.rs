//! Bad input gets a clear error, never a panic: truncated models, prompts longer than the
//! context, token ids outside the vocabulary, sessions larger than the device allows.

use std::path::Path;
use std::sync::Arc;

use tandem_engine::gguf::Gguf;
use tandem_engine::gpu::{Gpu, GpuOptions};
use tandem_engine::model::{Model, Session, SessionOptions};
use tandem_engine::sampling::Sampler;
use tandem_engine::Error;

fn tiny() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny-llama.gguf"))
        .unwrap()
}

fn model(bytes: &[u8]) -> Arc<Model> {
    let gpu = Arc::new(pollster::block_on(Gpu::new(&GpuOptions::default())).unwrap());
    let g = Gguf::parse(&bytes).unwrap();
    Arc::new(pollster::block_on(Model::load(gpu, &g, &bytes, &mut |_| {})).unwrap())
}

#[test]
fn truncated_model_is_an_error() {
    let bytes = tiny();
    for cut in [10, bytes.len() / 2, bytes.len() - 1] {
        let err = Gguf::parse(&&bytes[..cut]).expect_err("a truncated file must not parse");
        let msg = err.to_string();
        assert!(
            msg.contains("truncated") || msg.contains("corrupt"),
            "{msg}"
        );
    }
}

#[test]
fn prompt_longer_than_context() {
    let m = model(&tiny());
    let mut s = pollster::block_on(Session::new(
        m,
        SessionOptions {
            ctx: 16,
            ubatch: 8,
            ..Default::default()
        },
    ))
    .unwrap();
    let prompt: Vec<u32> = (3..23).collect();
    match pollster::block_on(s.prefill(&prompt, &mut Sampler::greedy())) {
        Err(Error::ContextOverflow {
            tokens: 20,
            context: 16,
        }) => {}
        other => panic!("expected ContextOverflow, got {other:?}"),
    }
    // Nothing was fed: the session still works.
    assert_eq!(s.pos(), 0);
    pollster::block_on(s.prefill(&prompt[..10], &mut Sampler::greedy())).unwrap();
    // Decoding past the end of the context is refused too (16 positions: 10 + 6 decoded).
    for _ in 0..6 {
        pollster::block_on(s.decode(&mut Sampler::greedy())).unwrap();
    }
    assert!(matches!(
        pollster::block_on(s.decode(&mut Sampler::greedy())),
        Err(Error::ContextOverflow { .. })
    ));
}

#[test]
fn token_outside_vocabulary() {
    let m = model(&tiny());
    let n_vocab = m.config.n_vocab;
    let mut s = pollster::block_on(Session::new(
        m,
        SessionOptions {
            ctx: 16,
            ubatch: 8,
            ..Default::default()
        },
    ))
    .unwrap();
    let err = pollster::block_on(s.prefill(&[1, n_vocab], &mut Sampler::greedy())).unwrap_err();
    assert!(err.to_string().contains("outside the vocabulary"), "{err}");
}

#[test]
fn session_larger_than_the_device_allows() {
    let m = model(&tiny());
    let max = m.gpu.max_binding();
    let err = pollster::block_on(Session::new(
        m,
        SessionOptions {
            ctx: u32::MAX / 2,
            ubatch: 8,
            ..Default::default()
        },
    ))
    .err()
    .expect("a KV cache beyond the binding limit must be refused");
    match err {
        Error::Limits { need, have, .. } => assert!(need > have && have == max),
        other => panic!("expected Limits, got {other}"),
    }
}
