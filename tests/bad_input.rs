//! Bad input and faults get a clear error, never a panic: truncated models, models whose tensors
//! contradict their metadata, models too large for the adapter, prompts longer than the context,
//! token ids outside the vocabulary, sessions larger than the device allows, a device lost in
//! the middle of a generation.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tandem_engine::gguf::{Gguf, Value};
use tandem_engine::gpu::{Gpu, GpuOptions};
use tandem_engine::model::{Model, Session, SessionOptions};
use tandem_engine::sampling::Sampler;
use tandem_engine::Error;

#[path = "../engine/tests/support/gguf_writer.rs"]
mod gguf_writer;
use gguf_writer::Builder;

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
            outputs: 8,
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
            outputs: 8,
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
            outputs: 8,
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

/// `bytes` (a GGUF) rewritten by `edit`, which gets its metadata and tensors to change.
fn rewritten(bytes: &[u8], edit: impl FnOnce(&mut Builder)) -> Vec<u8> {
    let g = Gguf::parse(&bytes).unwrap();
    let mut b = Builder::new();
    b.alignment = g.alignment;
    b.kvs = g.metadata.clone();
    for t in &g.tensors {
        let data = g.tensor_data(&bytes, t).unwrap().into_owned();
        b = b.tensor(&t.name, &t.dims, t.ty.id(), data);
    }
    edit(&mut b);
    b.build()
}

/// Loading the model in `bytes` fails; returns the error.
fn load_err(bytes: &[u8]) -> Error {
    let gpu = Arc::new(pollster::block_on(Gpu::new(&GpuOptions::default())).unwrap());
    let g = Gguf::parse(&bytes).expect("the file itself is well formed");
    match pollster::block_on(Model::load(gpu, &g, &bytes, &mut |_| {})) {
        Ok(_) => panic!("the model loaded"),
        Err(e) => e,
    }
}

#[test]
fn tensors_that_contradict_the_metadata() {
    let bytes = tiny();
    let g = Gguf::parse(&bytes.as_slice()).unwrap();
    let n_embd = g.req_u32("llama.embedding_length").unwrap() as u64;
    let n_layer = g.req_u32("llama.block_count").unwrap();

    // A matrix one row short (its data cut to match, so the file itself is sound).
    let e = load_err(&rewritten(&bytes, |b| {
        let t = b
            .tensors
            .iter_mut()
            .find(|t| t.name == "blk.0.attn_q.weight")
            .unwrap();
        let row = t.data.len() / t.dims[1] as usize;
        t.dims[1] -= 1;
        t.data.truncate(t.data.len() - row);
    }));
    match &e {
        Error::TensorShape {
            name,
            found,
            expected,
        } => {
            assert_eq!(name, "blk.0.attn_q.weight");
            assert_eq!(found[1] + 1, expected[1]);
        }
        other => panic!("expected TensorShape, got {other:?}"),
    }
    assert!(e.to_string().contains("blk.0.attn_q.weight"), "{e}");

    // A tensor of a type Tandem cannot run (an id no GGML type has yet: its size is unknown,
    // so the file still parses).
    let e = load_err(&rewritten(&bytes, |b| {
        let t = b
            .tensors
            .iter_mut()
            .find(|t| t.name == "blk.0.attn_k.weight");
        t.unwrap().ty = 200;
    }));
    assert!(
        matches!(&e, Error::UnsupportedTensorType { name, .. } if name == "blk.0.attn_k.weight"),
        "{e:?}"
    );
    assert!(e.to_string().contains("re-quantize"), "{e}");

    // A tensor the architecture needs is missing.
    let e = load_err(&rewritten(&bytes, |b| {
        b.tensors.retain(|t| t.name != "blk.1.ffn_down.weight")
    }));
    assert!(
        matches!(&e, Error::MissingTensor(n) if n == "blk.1.ffn_down.weight"),
        "{e:?}"
    );
    assert!(e.to_string().contains("blk.1.ffn_down.weight"), "{e}");

    // The metadata claims a layer more than the tensors hold.
    let e = load_err(&rewritten(&bytes, |b| {
        let kv = b.kvs.iter_mut().find(|(k, _)| k == "llama.block_count");
        kv.unwrap().1 = Value::U32(n_layer + 1);
    }));
    assert!(
        matches!(&e, Error::MissingTensor(n) if n.starts_with(&format!("blk.{n_layer}."))),
        "{e:?}"
    );

    // ... or a wider embedding than the tensors have.
    let e = load_err(&rewritten(&bytes, |b| {
        let kv = b
            .kvs
            .iter_mut()
            .find(|(k, _)| k == "llama.embedding_length");
        kv.unwrap().1 = Value::U32(n_embd as u32 * 2);
    }));
    assert!(matches!(&e, Error::TensorShape { .. }), "{e:?}");
    assert!(e.to_string().contains("token_embd.weight"), "{e}");

    // A key of the wrong type, and a required key missing.
    let e = load_err(&rewritten(&bytes, |b| {
        let kv = b
            .kvs
            .iter_mut()
            .find(|(k, _)| k == "llama.embedding_length");
        kv.unwrap().1 = Value::String(n_embd.to_string());
    }));
    assert!(
        matches!(&e, Error::MetadataType { key, .. } if key == "llama.embedding_length"),
        "{e:?}"
    );
    let e = load_err(&rewritten(&bytes, |b| {
        b.kvs.retain(|(k, _)| k != "llama.attention.head_count")
    }));
    assert!(
        matches!(&e, Error::MissingMetadata { key, .. } if key == "llama.attention.head_count"),
        "{e:?}"
    );
    assert!(e.to_string().contains("llama.attention.head_count"), "{e}");
}

#[test]
fn model_too_large_for_the_adapter_is_refused_before_any_upload() {
    let bytes = tiny();
    let g = Gguf::parse(&bytes.as_slice()).unwrap();
    let mut gpu = pollster::block_on(Gpu::new(&GpuOptions::default())).unwrap();
    // An adapter whose storage bindings hold less than one row of the embeddings: a browser's
    // 128 MiB bindings against a model with very long rows, in miniature.
    let t = g.tensor("token_embd.weight").unwrap();
    let row = t.n_bytes / t.dims[1];
    gpu.limits.max_storage_buffer_binding_size = row - 4;
    let mut heard = 0;
    let e = pollster::block_on(Model::load(Arc::new(gpu), &g, &bytes, &mut |_| heard += 1))
        .err()
        .expect("a model whose rows exceed a binding must be refused");
    assert_eq!(heard, 0, "no tensor may be uploaded before the refusal");
    match &e {
        Error::Limits { what, need, have } => {
            assert!(what.contains("one row of"), "{what}");
            assert!(need > have && *have == row - 4, "{e}");
        }
        other => panic!("expected Limits, got {other:?}"),
    }
    let msg = e.to_string();
    assert!(msg.contains("smaller quantization"), "{msg}");
}

#[test]
fn device_destroyed_mid_generation_fails_with_device_lost() {
    // On a thread, so that a hang fails the test instead of stalling it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let m = model(&tiny());
        let gpu = m.gpu.clone();
        let mut s = pollster::block_on(Session::new(
            m,
            SessionOptions {
                ctx: 64,
                ubatch: 8,
                outputs: 8,
                ..Default::default()
            },
        ))
        .unwrap();
        let mut sampler = Sampler::greedy();
        pollster::block_on(s.prefill(&[1, 5, 9, 13], &mut sampler)).unwrap();
        for _ in 0..3 {
            pollster::block_on(s.decode(&mut sampler)).unwrap();
        }
        gpu.device.destroy();
        let first = pollster::block_on(s.decode(&mut sampler));
        // And it stays lost: the next call fails alike rather than hanging or panicking.
        let second = pollster::block_on(s.decode(&mut sampler));
        let _ = tx.send((first.map(drop), second.map(drop), gpu.check_lost()));
    });
    let (first, second, check) = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("decoding on a destroyed device must fail, not hang");
    for r in [first, second, check] {
        match r {
            Err(Error::DeviceLost(why)) => assert!(why.contains("destroyed"), "{why}"),
            other => panic!("expected DeviceLost, got {other:?}"),
        }
    }
}

/// A model and KV cache together larger than the device's memory are refused before anything
/// is uploaded, with both sizes. A Vulkan GPU tells its memory; a software adapter (lavapipe
/// here) does not, so the test states one.
#[test]
fn model_larger_than_the_device_memory_is_refused_before_the_upload() {
    let bytes = tiny();
    let g = Gguf::parse(&bytes.as_slice()).unwrap();
    let mut gpu = pollster::block_on(Gpu::new(&GpuOptions::default())).unwrap();
    if gpu.info.backend == wgpu::Backend::Vulkan && gpu.info.device_type != wgpu::DeviceType::Cpu {
        assert!(gpu.memory.is_some_and(|m| m > 0), "{}", gpu.describe());
    }
    let config = Model::check(&gpu, &g).unwrap();
    // 256 positions: whole attention tiles, so the cache holds exactly these.
    let opts = SessionOptions {
        ctx: 256,
        ubatch: 8,
        outputs: 8,
        ..Default::default()
    };
    let kv = 2
        * (config.n_layer + config.n_nextn) as u64
        * (config.n_kv_head * config.head_dim) as u64
        * 256
        * opts.kv.bytes();
    let need = Model::weight_bytes(&g) + kv;
    gpu.memory = Some(need);
    opts.check(&gpu, &config).unwrap();
    gpu.memory = Some(need - 1);
    match opts.check(&gpu, &config) {
        Err(Error::Limits {
            what,
            need: n,
            have,
        }) => {
            assert!(what.contains("device memory"), "{what}");
            assert_eq!((n, have), (need, need - 1));
        }
        other => panic!("expected Limits, got {other:?}"),
    }
    // Four sessions' caches (the serve slots) need four times the cache.
    gpu.memory = Some(need);
    assert!(matches!(
        opts.check_set(&gpu, &config, 4),
        Err(Error::Limits { .. })
    ));
}

#[test]
fn context_too_long_for_the_adapter_is_refused_from_the_metadata_alone() {
    let bytes = tiny();
    let g = Gguf::parse(&bytes.as_slice()).unwrap();
    let mut gpu = pollster::block_on(Gpu::new(&GpuOptions::default())).unwrap();
    // Bindings of 1 MiB, so that the longest context that fits is cheap to allocate.
    gpu.limits.max_storage_buffer_binding_size = 1 << 20;
    let config = Model::check(&gpu, &g).unwrap();
    let opts = |ctx| SessionOptions {
        ctx,
        ubatch: 8,
        outputs: 8,
        ..Default::default()
    };
    // The cache holds whole tiles of ATTN_TILE positions, so the longest context that fits is
    // the most whole tiles that do, and one position more takes a whole tile more.
    let per_position = (config.n_kv_head * config.head_dim) as u64 * opts(1).kv.bytes();
    let tile = tandem_engine::kernels::ATTN_TILE;
    let longest = ((1 << 20) / per_position) as u32 / tile * tile;
    opts(longest).check(&gpu, &config).unwrap();
    let before_upload = opts(longest + 1)
        .check(&gpu, &config)
        .expect_err("a KV cache past the binding limit must be refused");
    match &before_upload {
        Error::Limits { what, need, have } => {
            assert!(what.contains("lower the context"), "{what}");
            assert_eq!(
                (*need, *have),
                ((longest + tile) as u64 * per_position, 1 << 20)
            );
        }
        other => panic!("expected Limits, got {other:?}"),
    }
    // A session, after the upload, decides the same at the same length.
    let m =
        Arc::new(pollster::block_on(Model::load(Arc::new(gpu), &g, &bytes, &mut |_| {})).unwrap());
    pollster::block_on(Session::new(m.clone(), opts(longest))).unwrap();
    let after_upload = pollster::block_on(Session::new(m, opts(longest + 1)))
        .err()
        .expect("the session must refuse it too");
    assert_eq!(after_upload.to_string(), before_upload.to_string());
}
