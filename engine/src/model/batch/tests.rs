//! Batched decode steps on the tiny fixtures (compiled in, so these run natively and in the
//! browser): generations whose steps run together in one pass of a [`SessionSet`] give exactly
//! the tokens each gives alone in a session of its own, greedy or sampled (each row by its own
//! sampler and seed), with prompts of different lengths, slots that join while others decode,
//! slots reused for a new prompt after a reply ends, and (greedy) a slot that steps alone with
//! its own pass (run ahead) between batched steps, as serve does.

use std::collections::VecDeque;
use std::sync::Arc;

use super::SessionSet;
use crate::generate::{generate, GenerateOptions, Generator};
use crate::gguf::Gguf;
use crate::kernels::tests::{gpu, gpu_tests};
use crate::model::{Model, Session, SessionOptions};
use crate::sampling::{Sampler, SamplerParams};
use crate::tokenizer::Tokenizer;

const LLAMA: &[u8] = include_bytes!("../../../../tests/fixtures/tiny-llama.gguf");
const QWEN3MOE: &[u8] = include_bytes!("../../../../tests/fixtures/tiny-qwen3moe.gguf");
const GEMMA3: &[u8] = include_bytes!("../../../../tests/fixtures/tiny-gemma3.gguf");

const OPTS: SessionOptions = SessionOptions {
    ctx: 40,
    ubatch: 16,
    outputs: 16,
    kv: crate::model::KvType::F16,
};

/// Prompt i: BOS (id 1) and 2i + 1 seeded ids past the special tokens, 1 to 23 tokens long.
fn prompt(i: u32, n_vocab: u32) -> Vec<u32> {
    let ids = (0..2 * i + 1).map(|j| 3 + (i * 7919 + j * 104_729 + i * j * 31) % (n_vocab - 3));
    [1].into_iter().chain(ids).collect()
}

/// Greedy generation of 3 to 9 tokens, past end tokens (the replies end at different steps).
fn greedy(i: u32) -> GenerateOptions {
    GenerateOptions {
        max_tokens: 3 + (i as usize * 5) % 7,
        stop_at_eog: false,
        sampling: SamplerParams::greedy(),
        ..Default::default()
    }
}

/// For odd i, sampled generation of 3 to 9 tokens with llama.cpp's chain and a repeat penalty
/// (the rows' histories), seed i; greedy for even i, so that steps mix both.
fn some_sampled(i: u32) -> GenerateOptions {
    if i.is_multiple_of(2) {
        return greedy(i);
    }
    GenerateOptions {
        sampling: SamplerParams {
            temperature: 0.9,
            repeat_penalty: 1.1,
            seed: i as u64,
            ..Default::default()
        },
        ..greedy(i)
    }
}

/// Eleven prompts, each generated alone with `opts(i)`, then through `n_seq` slots of a session
/// set: a slot takes the next prompt when it is free, at most one new prompt a step (so prompts
/// join while the others decode), and every step of the running slots is one batched pass,
/// except that a greedy slot running alone takes its own pass on even steps (`tandem serve` does
/// so always), run ahead of the host, which the next batched step undoes (a sampled pass run
/// ahead would have drawn its random number, so sampled slots always step together here). The
/// tokens must be the same.
async fn batched_equals_alone(bytes: &'static [u8], n_seq: u32, opts: fn(u32) -> GenerateOptions) {
    let g = Gguf::parse(&bytes).unwrap();
    let model = Arc::new(
        Model::load(gpu().await, &g, &bytes, &mut |_| {})
            .await
            .unwrap(),
    );
    let tokenizer = Tokenizer::from_gguf(&g).unwrap();
    let n_vocab = model.config.n_vocab;
    let n = 11;
    let mut alone = Vec::new();
    for i in 0..n {
        let mut s = Session::new(model.clone(), OPTS).await.unwrap();
        let out = generate(&mut s, &tokenizer, &prompt(i, n_vocab), &opts(i), |_| {})
            .await
            .unwrap();
        alone.push(out.tokens);
    }

    let mut set = SessionSet::new(model.clone(), OPTS, n_seq).await.unwrap();
    // As on a GPU (lavapipe turns it off).
    for slot in 0..set.len() {
        set.session_mut(slot).run_ahead = true;
    }
    let mut waiting: VecDeque<u32> = (0..n).collect();
    let mut running: Vec<Option<(u32, Generator)>> = (0..n_seq).map(|_| None).collect();
    let mut together = vec![Vec::new(); n as usize];
    let (mut widest, mut own_passes) = (0, 0);
    for step in 0.. {
        if waiting.is_empty() && running.iter().all(Option::is_none) {
            break;
        }
        if let Some(slot) = running.iter().position(Option::is_none) {
            if let Some(i) = waiting.pop_front() {
                let s = set.session_mut(slot);
                let gen = Generator::start(s, None, &prompt(i, n_vocab), &opts(i))
                    .await
                    .unwrap();
                running[slot] = Some((i, gen));
            }
        }
        let mut batch = Vec::new();
        for (slot, r) in running.iter_mut().enumerate() {
            let Some((i, gen)) = r else { continue };
            assert!(gen.batchable());
            if gen.hand_out(set.session(slot), &tokenizer, |_| true) {
                batch.push(slot);
            } else {
                together[*i as usize] = gen.tokens().to_vec();
                *r = None;
            }
        }
        widest = widest.max(batch.len());
        if let ([slot], 0) = (&batch[..], step % 2) {
            let (i, gen) = running[*slot].as_mut().unwrap();
            if opts(*i).sampling.is_greedy() {
                gen.advance(set.session_mut(*slot), None).await.unwrap();
                own_passes += 1;
                continue;
            }
        }
        let ids = batched_step(&mut set, &mut running, &batch).await;
        for (&slot, id) in batch.iter().zip(ids) {
            running[slot].as_mut().unwrap().1.take(id);
        }
    }
    assert_eq!(
        widest, n_seq as usize,
        "every slot decoded in one pass at some step"
    );
    if (0..n).all(|i| opts(i).sampling.is_greedy()) {
        assert!(own_passes > 0, "a slot stepped alone with its own pass");
    }
    for i in 0..n as usize {
        assert_eq!(
            together[i],
            alone[i],
            "prompt {i} ({} tokens): batched with others, alone",
            prompt(i as u32, n_vocab).len()
        );
    }
}

/// One batched step of the generations in the slots `batch`, each with its own sampler.
async fn batched_step(
    set: &mut SessionSet,
    running: &mut [Option<(u32, Generator)>],
    batch: &[usize],
) -> Vec<u32> {
    let mut rows: Vec<(usize, &mut Sampler)> = running
        .iter_mut()
        .enumerate()
        .filter(|(slot, _)| batch.contains(slot))
        .map(|(slot, r)| (slot, r.as_mut().unwrap().1.sampler()))
        .collect();
    set.decode(&mut rows).await.unwrap()
}

async fn batched_llama_equals_each_alone() {
    batched_equals_alone(LLAMA, 4, greedy).await;
}

async fn batched_moe_equals_each_alone() {
    batched_equals_alone(QWEN3MOE, 3, greedy).await;
}

/// Gemma 3: sliding-window layers, q/k norms and post-norms.
async fn batched_gemma3_equals_each_alone() {
    batched_equals_alone(GEMMA3, 3, greedy).await;
}

async fn batched_sampling_equals_each_alone() {
    batched_equals_alone(LLAMA, 4, some_sampled).await;
}

/// The set's shared KV buffer must fit a storage binding: refused, naming the slots, when not.
async fn a_set_too_large_for_a_binding_is_refused() {
    let g = Gguf::parse(&LLAMA).unwrap();
    let gpu = gpu().await;
    let config = Model::check(&gpu, &g).unwrap();
    let c = &config;
    let per_seq = (c.n_kv_head * c.head_dim) as u64 * OPTS.ctx as u64 * OPTS.kv.bytes();
    let n_seq = (gpu.max_binding() / per_seq + 1) as u32;
    let e = OPTS
        .check_set(&gpu, &config, n_seq)
        .unwrap_err()
        .to_string();
    assert!(e.contains("parallel slots"), "{e}");
    OPTS.check_set(&gpu, &config, 4).unwrap();
}

gpu_tests!(
    batched_llama_equals_each_alone,
    batched_sampling_equals_each_alone,
    batched_moe_equals_each_alone,
    batched_gemma3_equals_each_alone,
    a_set_too_large_for_a_binding_is_refused
);
