//! Speculative decoding on the tiny fixtures: greedy tokens with a drafter equal the tokens
//! without, over 20 prompts, and the acceptance bookkeeping is right (a drafter identical to the
//! target is always accepted; a different one is not, yet changes nothing).

use std::path::Path;
use std::sync::Arc;

use tandem_engine::generate::{generate_with, GenerateOptions, StopReason};
use tandem_engine::gguf::{Gguf, MmapSource};
use tandem_engine::gpu::{Gpu, GpuOptions};
use tandem_engine::model::{Config, Model, Session, SessionOptions};
use tandem_engine::sampling::{Sampler, SamplerParams};
use tandem_engine::speculative::{check_draft_vocab, Drafter, SpecStats};
use tandem_engine::tokenizer::Tokenizer;

fn gpu() -> Arc<Gpu> {
    static GPU: std::sync::OnceLock<Arc<Gpu>> = std::sync::OnceLock::new();
    GPU.get_or_init(|| {
        Arc::new(pollster::block_on(Gpu::new(&GpuOptions::default())).expect("a GPU adapter"))
    })
    .clone()
}

struct Loaded {
    model: Arc<Model>,
    tokenizer: Tokenizer,
}

fn load(file: &str) -> Loaded {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(file);
    let src = MmapSource::open(&path).unwrap();
    let g = Gguf::parse(&src).unwrap();
    let model = Arc::new(pollster::block_on(Model::load(gpu(), &g, &src, &mut |_| {})).unwrap());
    Loaded {
        model,
        tokenizer: Tokenizer::from_gguf(&g).unwrap(),
    }
}

const OPTS: SessionOptions = SessionOptions {
    ctx: 96,
    ubatch: 16,
};

fn session(m: &Loaded) -> Session {
    pollster::block_on(Session::new(m.model.clone(), OPTS)).unwrap()
}

/// 20 prompts of 1 to 20 seeded random ids (past the special tokens at the vocabulary's start).
fn prompts(n_vocab: u32) -> Vec<Vec<u32>> {
    (0..20u32)
        .map(|i| {
            (0..=i)
                .map(|j| 3 + (i * 7919 + j * 104_729 + i * j * 31) % (n_vocab - 3))
                .collect()
        })
        .collect()
}

fn greedy(max_tokens: usize, draft_max: usize) -> GenerateOptions {
    GenerateOptions {
        max_tokens,
        stop_at_eog: false,
        sampling: SamplerParams::greedy(),
        draft_max,
    }
}

/// Generates after every prompt with and without `drafter`; asserts the tokens are the same and
/// returns the speculation's totals.
fn identical_with(
    target: &Loaded,
    mut drafter: Option<Drafter<'_>>,
    draft_max: usize,
) -> SpecStats {
    let mut plain = session(target);
    let mut spec = session(target);
    let mut total = SpecStats::default();
    for (i, prompt) in prompts(target.model.config.n_vocab).iter().enumerate() {
        // Budgets that end inside a speculative step, and long runs that reach the context's end.
        let max_tokens = [24, 7, 95][i % 3];
        let opts = greedy(max_tokens, draft_max);
        plain.truncate(0);
        let want = pollster::block_on(generate_with(
            &mut plain,
            None,
            &target.tokenizer,
            prompt,
            &opts,
            |_| true,
        ))
        .unwrap();
        spec.truncate(0);
        let got = pollster::block_on(generate_with(
            &mut spec,
            drafter.as_mut(),
            &target.tokenizer,
            prompt,
            &opts,
            |_| true,
        ))
        .unwrap();
        assert_eq!(
            got.tokens, want.tokens,
            "prompt {i}: tokens with speculation"
        );
        assert_eq!(got.stop, want.stop, "prompt {i}: stop reason");
        assert_eq!(got.text, want.text, "prompt {i}: text");
        if max_tokens == 95 {
            assert_eq!(got.stop, StopReason::ContextFull, "prompt {i}");
        }
        let s = got.speculation.expect("speculation ran");
        total.drafted += s.drafted;
        total.accepted += s.accepted;
        total.passes += s.passes;
    }
    total
}

/// The target as its own draft model: every draft is accepted, and each pass yields its drafts
/// and one token more.
#[test]
fn a_draft_model_identical_to_the_target_is_always_accepted() {
    let target = load("tiny-llama.gguf");
    let mut d = session(&target);
    let s = identical_with(&target, Some(Drafter::Model(&mut d)), 4);
    assert!(s.drafted > 0);
    assert_eq!(s.accepted, s.drafted, "{s:?}");
    assert_eq!(s.acceptance_rate(), 1.0);
    eprintln!(
        "identical draft model: {s:?}, {:.2} tokens a pass",
        s.tokens_per_pass()
    );
}

/// A different draft model (another family's random weights, same vocabulary): drafts are
/// rejected, and the output is the target's all the same.
#[test]
fn a_different_draft_model_changes_nothing() {
    let target = load("tiny-llama.gguf");
    let draft = load("tiny-qwen3.gguf");
    let mut d = session(&draft);
    for draft_max in [1, 3, 8] {
        let s = identical_with(&target, Some(Drafter::Model(&mut d)), draft_max);
        assert!(s.drafted > 0 && s.accepted < s.drafted, "{s:?}");
        eprintln!(
            "different draft model, {draft_max} drafts: acceptance {:.3} ({s:?})",
            s.acceptance_rate()
        );
    }
}

/// A draft model of another vocabulary is refused with what to do, from the headers alone;
/// the tiny fixtures share one tokenizer and pass.
#[test]
fn a_draft_model_of_another_vocabulary_is_refused() {
    let config = |path: &Path| {
        let src = MmapSource::open(path).unwrap();
        Config::from_gguf(&Gguf::parse(&src).unwrap()).unwrap()
    };
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let target = config(&fixtures.join("tiny-llama.gguf"));
    check_draft_vocab(&config(&fixtures.join("tiny-qwen3.gguf")), &target).unwrap();
    let smollm2 = tandem_engine::platform::model_dir().join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(smollm2.exists(), "run scripts/fetch-models.sh --all");
    let err = check_draft_vocab(&config(&smollm2), &target).unwrap_err();
    assert!(err.to_string().contains("same tokenizer"), "{err}");
    // Same size, other strings.
    let mut other = target.clone();
    other.vocab_hash ^= 1;
    assert!(check_draft_vocab(&other, &target).is_err());
}

/// `verify` returns the greedy token after each fed token: feeding the greedy continuation
/// gives that continuation shifted by one; after a wrong token, the argmax of the logits there.
#[test]
fn verify_gives_the_greedy_token_after_each_row() {
    let m = load("tiny-qwen3moe.gguf");
    let mut s = session(&m);
    let prompt = [4u32, 99, 250, 17];
    let mut g = Sampler::greedy();
    let mut seq = vec![pollster::block_on(s.prefill(&prompt, &mut g)).unwrap()];
    for _ in 0..6 {
        seq.push(pollster::block_on(s.decode_last(&mut g)).unwrap());
    }
    s.truncate(prompt.len() as u32);
    let got = pollster::block_on(s.verify(&seq[..6])).unwrap();
    assert_eq!(got, seq[1..7], "verify of the greedy continuation");
    assert_eq!(s.pos(), prompt.len() as u32 + 6);
    s.truncate(prompt.len() as u32 + 2);
    let wrong = (seq[2] + 1) % m.model.config.n_vocab;
    let got = pollster::block_on(s.verify(&[wrong, seq[3]])).unwrap();
    s.truncate(prompt.len() as u32 + 2);
    let logits = pollster::block_on(s.eval(&[wrong], 1)).unwrap();
    let best = (0..logits.len())
        .max_by(|&a, &b| logits[a].total_cmp(&logits[b]).then(b.cmp(&a)))
        .unwrap() as u32;
    assert_eq!(got[0], best, "verify after a wrong token");
    // Too many tokens for one pass is an error, not a panic.
    s.truncate(0);
    let many = vec![1u32; s.max_verify() as usize + 1];
    assert!(pollster::block_on(s.verify(&many)).is_err());
}
