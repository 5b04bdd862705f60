//! Speculative decoding on the tiny fixtures (compiled in, so these run natively and in the
//! browser): greedy tokens with a drafter equal the tokens without over 20 prompts, for a draft
//! model and for the MTP layer; the acceptance bookkeeping is right (a drafter identical to the
//! target is always accepted; a different one is not, yet changes nothing); and the MTP layer's
//! logits and drafts match torch on the GGUF's own weights (tests/golden/mtp_*.json).

use std::sync::Arc;

use super::{Drafter, GuardOptions, SpecStats};
use crate::generate::{generate_with, GenerateOptions, StopReason};
use crate::gguf::Gguf;
use crate::kernels::reference;
use crate::kernels::tests::{assert_close, gpu, gpu_tests};
use crate::model::{KvType, Model, Session, SessionOptions};
use crate::sampling::{Sampler, SamplerParams};
use crate::tokenizer::Tokenizer;

const LLAMA: &[u8] = include_bytes!("../../../tests/fixtures/tiny-llama.gguf");
const QWEN3: &[u8] = include_bytes!("../../../tests/fixtures/tiny-qwen3.gguf");
const GLM_MTP: &[u8] = include_bytes!("../../../tests/fixtures/tiny-glm4moe-mtp.gguf");
const GLM_MTP_GOLDEN: &str = include_str!("../../../tests/golden/mtp_tiny-glm4moe-mtp.json");

struct Loaded {
    model: Arc<Model>,
    tokenizer: Tokenizer,
}

async fn load(bytes: &'static [u8]) -> Loaded {
    let g = Gguf::parse(&bytes).unwrap();
    let model = Model::load(gpu().await, &g, &bytes, &mut |_| {})
        .await
        .unwrap();
    Loaded {
        model: Arc::new(model),
        tokenizer: Tokenizer::from_gguf(&g).unwrap(),
    }
}

/// A context the longest generations below run into.
const CTX: u32 = 24;

async fn session(m: &Loaded) -> Session {
    session_of(m, CTX).await
}

async fn session_of(m: &Loaded, ctx: u32) -> Session {
    let opts = options(ctx, SessionOptions::default().kv);
    Session::new(m.model.clone(), opts).await.unwrap()
}

/// The sessions' options: `ctx` positions, passes of at most 16 tokens, a `kv` cache.
fn options(ctx: u32, kv: KvType) -> SessionOptions {
    SessionOptions {
        ctx,
        ubatch: 16,
        outputs: 16,
        kv,
    }
}

/// 20 prompts: BOS (id 1 in the fixtures' tokenizer) and 0 to 19 seeded ids past the special
/// tokens, as tests/reference/make_mtp_fixture.py trained the MTP layer on.
fn prompts(n_vocab: u32) -> Vec<Vec<u32>> {
    (0..20u32)
        .map(|i| {
            let ids = (0..i).map(|j| 3 + (i * 7919 + j * 104_729 + i * j * 31) % (n_vocab - 3));
            [1].into_iter().chain(ids).collect()
        })
        .collect()
}

fn greedy(max_tokens: usize, draft_max: usize) -> GenerateOptions {
    GenerateOptions {
        max_tokens,
        stop_at_eog: false,
        sampling: SamplerParams::greedy(),
        draft_max,
        // Every step drafts draft_max (as far as budget and context allow).
        draft_adaptive: false,
        guard: None,
    }
}

/// A guard that hands over to the other mode every `window` tokens, whatever the timings.
fn alternating(window: usize) -> GuardOptions {
    GuardOptions {
        window,
        retry_after: 0,
        retry_max: 0,
        margin: 0.0,
    }
}

/// Generates after every prompt with and without `drafter` (the same session, so cached
/// prefixes are reused across prompts as in a chat), speculating on every step unless `guard`;
/// asserts the tokens are the same and returns the speculation's totals.
async fn identical_with(
    target: &Loaded,
    mut drafter: Drafter<'_>,
    draft_max: usize,
    guard: Option<GuardOptions>,
) -> SpecStats {
    let mut plain = session(target).await;
    let mut spec = session(target).await;
    let mut total = SpecStats::default();
    for (i, prompt) in prompts(target.model.config.n_vocab).iter().enumerate() {
        // Budgets that end inside a speculative step, and runs to the end of the context.
        let max_tokens = [8, 3, CTX as usize][i % 3];
        let opts = GenerateOptions {
            guard,
            ..greedy(max_tokens, draft_max)
        };
        let t = &target.tokenizer;
        let want = generate_with(&mut plain, None, t, prompt, &opts, |_| true)
            .await
            .unwrap();
        let got = generate_with(&mut spec, Some(&mut drafter), t, prompt, &opts, |_| true)
            .await
            .unwrap();
        let case = format!("prompt {i}, {draft_max} drafts");
        assert_eq!(got.tokens, want.tokens, "{case}: tokens with speculation");
        assert_eq!(got.stop, want.stop, "{case}: stop reason");
        assert_eq!(got.text, want.text, "{case}: text");
        if max_tokens == CTX as usize {
            assert_eq!(got.stop, StopReason::ContextFull, "{case}");
        }
        let s = got.speculation.expect("speculation ran");
        assert_eq!(
            s.accepted + s.passes + s.plain,
            got.tokens.len() - 1,
            "{case}: every token after the first comes from a verification or a plain step"
        );
        total.add(&s);
    }
    total
}

/// The target as its own draft model: every draft is accepted.
async fn a_draft_model_identical_to_the_target_is_always_accepted() {
    let target = load(LLAMA).await;
    let mut d = session(&target).await;
    let s = identical_with(&target, Drafter::Model(&mut d), 4, None).await;
    assert!(s.drafted > 0);
    assert_eq!(s.accepted, s.drafted, "{s:?}");
    assert_eq!(s.acceptance_rate(), 1.0);
}

/// A different draft model (another family's random weights, the same tokenizer): drafts are
/// rejected, and the output is the target's all the same.
async fn a_different_draft_model_changes_nothing() {
    let target = load(LLAMA).await;
    let draft = load(QWEN3).await;
    let mut d = session(&draft).await;
    for draft_max in [1, 3] {
        let s = identical_with(&target, Drafter::Model(&mut d), draft_max, None).await;
        assert!(s.drafted > 0 && s.accepted < s.drafted, "{s:?}");
    }
}

/// The speed guard handing over between speculative rounds and plain steps (here every 3
/// tokens, whatever the timings): the tokens are the same, for the MTP layer (which catches up
/// on the plainly decoded positions when speculation resumes) and, natively, for a draft model
/// (which catches up in its own next step).
async fn plain_steps_between_rounds_change_nothing() {
    let target = load(GLM_MTP).await;
    let s = identical_with(&target, Drafter::Mtp, 3, Some(alternating(3))).await;
    assert!(s.plain > 0 && s.passes > 0 && s.accepted > 0, "{s:?}");
    if cfg!(target_arch = "wasm32") {
        return;
    }
    let llama = load(LLAMA).await;
    let mut d = session(&llama).await;
    let s = identical_with(&llama, Drafter::Model(&mut d), 2, Some(alternating(3))).await;
    assert!(s.plain > 0 && s.passes > 0 && s.accepted > 0, "{s:?}");
}

/// The guard lives on the session: a request goes on from the last one's timings (a request
/// without it leaves them be).
async fn the_guard_goes_on_from_the_last_request() {
    let target = load(GLM_MTP).await;
    let mut s = session(&target).await;
    let t = &target.tokenizer;
    let guarded = GenerateOptions {
        guard: Some(alternating(3)),
        ..greedy(10, 3)
    };
    let unguarded = greedy(10, 3);
    let prompt = [1u32, 40, 300];
    let timed = |s: &Session| s.speed_guard.as_ref().map_or(0, |g| g.timed_tokens());
    let mut seen = Vec::new();
    for opts in [&guarded, &unguarded, &guarded] {
        generate_with(&mut s, Some(&mut Drafter::Mtp), t, &prompt, opts, |_| true)
            .await
            .unwrap();
        seen.push(timed(&s));
    }
    assert!(
        seen[0] >= 6 && seen[1] == seen[0] && seen[2] >= seen[0] + 6,
        "{seen:?}"
    );
}

/// The adaptive draft length: longer while everything is accepted, shorter after a rejection,
/// within 1..=draft_max; drafting for itself the target keeps the longest drafts, a drafter it
/// rejects drafts one token at a time after the first misses.
async fn the_draft_length_adapts_to_the_acceptance() {
    use super::next_draft_len;
    assert_eq!(next_draft_len(3, 3, 3), 5);
    assert_eq!(next_draft_len(3, 3, 1), 2);
    assert_eq!(next_draft_len(1, 1, 0), 1);
    assert_eq!(next_draft_len(4, 2, 2), 4, "a step cut short by the budget");
    let target = load(LLAMA).await;
    let draft = load(QWEN3).await;
    let (mut own, mut other) = (session(&target).await, session(&draft).await);
    let mut plain = session(&target).await;
    let prompt = [1u32, 40, 300];
    let opts = GenerateOptions {
        max_tokens: 30,
        draft_adaptive: true,
        ..greedy(30, 6)
    };
    let t = &target.tokenizer;
    let want = generate_with(&mut plain, None, t, &prompt, &opts, |_| true)
        .await
        .unwrap();
    for (drafter, check) in [
        (Drafter::Model(&mut own), "own"),
        (Drafter::Model(&mut other), "other"),
    ] {
        let mut spec = session(&target).await;
        let mut drafter = drafter;
        let got = generate_with(&mut spec, Some(&mut drafter), t, &prompt, &opts, |_| true)
            .await
            .unwrap();
        assert_eq!(got.tokens, want.tokens, "{check}");
        let s = got.speculation.unwrap();
        if check == "own" {
            // 6 drafts a pass but where the budget cuts the last step.
            assert_eq!(s.accepted, s.drafted);
            assert!(s.passes <= 29usize.div_ceil(7) + 1, "{s:?}");
        } else {
            // From 6 down to 1 after 5 misses, then 1 a step while rejected.
            assert!(s.drafted < 6 * s.passes / 2, "{s:?}");
        }
    }
}

/// The MTP layer drafting for its model: the same tokens as without it, for draft lengths 0
/// (the pair is still made), 1 and 5; in the browser 5 only (the same kernels and host code at
/// every length, and each length is 90 s of SwiftShader on a 2-core machine).
async fn mtp_changes_nothing() {
    let target = load(GLM_MTP).await;
    let lengths: &[usize] = if cfg!(target_arch = "wasm32") {
        &[5]
    } else {
        &[0, 1, 5]
    };
    for &draft_max in lengths {
        let s = identical_with(&target, Drafter::Mtp, draft_max, None).await;
        // Some drafts are accepted: the paths after an accepted draft (the MTP cache's roll-back,
        // an accepted draft's hidden state) run too.
        assert!(draft_max == 0 || s.accepted > 0, "{s:?}");
        eprintln!(
            "tiny-glm4moe-mtp, {draft_max} drafts: acceptance {:.3}, {:.2} tokens a pass ({s:?})",
            s.acceptance_rate(),
            s.tokens_per_pass()
        );
    }
}

/// Feeds the fixture's prompts to `s` with greedy MTP rounds of 3 drafts until a round within 24
/// positions has a draft accepted; returns the token that round ended with (not yet fed).
async fn after_an_accepted_draft(m: &Loaded, s: &mut Session) -> u32 {
    let mut greedy = Sampler::greedy();
    for prompt in prompts(m.model.config.n_vocab) {
        let (mut last, _) = s.mtp_prefill(&prompt, &mut greedy).await.unwrap();
        while s.pos() + 4 <= 24 {
            let (_, k, next) = s.mtp_round(last, 3, &mut greedy).await.unwrap();
            last = next;
            if k > 0 {
                return last;
            }
        }
    }
    panic!("no draft accepted");
}

/// A conversation's next turn extends the last (its prompt, the tokens generated, more): the
/// MTP session reuses its cached prefix, where the MTP layer's pairs stop short of the target's
/// (those of the last round's verified tokens wait for the next round), and its first draft's
/// logits are a fresh session's over the whole prompt. The first turn ends after a round with
/// drafts accepted, whose pairs a reuse that trusted the MTP cache up to the target's would take
/// from the draft steps (the MTP layer's own hidden states, not the target's).
async fn mtp_reuses_a_conversations_prefix() {
    let m = load(GLM_MTP).await;
    let mut s = session_of(&m, 64).await;
    let mut greedy = Sampler::greedy();
    let last = after_an_accepted_draft(&m, &mut s).await;
    let prompt = [s.history(), &[last, 7, 8]].concat();
    let (first, fed) = s.mtp_prefill(&prompt, &mut greedy).await.unwrap();
    assert!(fed < prompt.len(), "the cached prefix is reused");
    let reused = s.mtp_draft_logits(first).await.unwrap();
    let mut fresh = session_of(&m, 64).await;
    let (want_first, _) = fresh.mtp_prefill(&prompt, &mut greedy).await.unwrap();
    assert_eq!(first, want_first);
    let want = fresh.mtp_draft_logits(first).await.unwrap();
    // The same on lavapipe to the bit; pairs taken from the draft steps are 4e-3 off.
    assert_close("mtp logits", "reused prefix", &reused, &want, 1e-9, 1e-4);
}

/// After a round with a draft accepted, plain decode steps (the speed guard's), then
/// [`super::resume`]: the MTP layer's cache holds the pairs of the plainly decoded positions, its
/// first draft's logits those of a fresh session fed the same tokens. Steps that did not keep
/// their hidden states are fed to the target again.
async fn mtp_catches_up_after_plain_steps() {
    let m = load(GLM_MTP).await;
    // An f32 KV cache, so that what differs is only the kernels' arithmetic (the catch-up
    // pass reads the prefix the rounds left, the fresh session makes it in a prompt pass).
    let opts = options(64, KvType::F32);
    let mut s = Session::new(m.model.clone(), opts).await.unwrap();
    let mut greedy = Sampler::greedy();
    let mut last = after_an_accepted_draft(&m, &mut s).await;
    s.set_next_token(last);
    for _ in 0..5 {
        last = s.decode(&mut greedy).await.unwrap();
    }
    let seq = [s.history(), &[last]].concat();
    let next = super::resume(&mut s, &Drafter::Mtp, last, &mut greedy)
        .await
        .unwrap()
        .expect("the MTP layer catches up in a pass");
    let resumed = s.mtp_draft_logits(next).await.unwrap();
    let mut fresh = Session::new(m.model.clone(), opts).await.unwrap();
    let (want_next, _) = fresh.mtp_prefill(&seq, &mut greedy).await.unwrap();
    assert_eq!(next, want_next);
    let want = fresh.mtp_draft_logits(next).await.unwrap();
    // 5e-8 on lavapipe; a catch-up that trusted the plain steps' positions is 1.7 off.
    assert_close(
        "mtp logits",
        "after plain steps",
        &resumed,
        &want,
        1e-6,
        1e-2,
    );
}

/// As [`mtp_catches_up_after_plain_steps`], with the plain steps keeping their hidden states
/// ([`Session::keep_mtp_pairs`]): no target pass at the resumption, the first draft step makes
/// the pairs. More steps than a pass's rows hold: the pairs of the first ones are made on the
/// way, the last step's row moved to the front (passes of 4 rows: every 3 steps).
async fn mtp_keeps_the_pairs_of_plain_steps() {
    let m = load(GLM_MTP).await;
    for (ubatch, steps) in [(16, 40), (4, 10), (4, 11), (4, 12)] {
        let opts = SessionOptions {
            ubatch,
            outputs: ubatch,
            ..options(72, KvType::F32)
        };
        let mut s = Session::new(m.model.clone(), opts).await.unwrap();
        // As on a GPU: each step's pass is recorded before the host knows the token it feeds.
        s.run_ahead = true;
        let mut greedy = Sampler::greedy();
        let mut last = after_an_accepted_draft(&m, &mut s).await;
        s.set_next_token(last);
        for _ in 0..steps {
            s.keep_mtp_pairs();
            last = s.decode(&mut greedy).await.unwrap();
        }
        let kept = super::resume(&mut s, &Drafter::Mtp, last, &mut greedy)
            .await
            .unwrap();
        assert_eq!(kept, None, "no target pass: the pairs were kept");
        let history = s.history().to_vec();
        let resumed = s.mtp_draft_logits(last).await.unwrap();
        let mut fresh = Session::new(m.model.clone(), opts).await.unwrap();
        let (want_last, _) = fresh.mtp_prefill(&history, &mut greedy).await.unwrap();
        assert_eq!(last, want_last);
        let want = fresh.mtp_draft_logits(last).await.unwrap();
        let case = format!("{steps} steps kept in passes of {ubatch}");
        assert_close("mtp logits", &case, &resumed, &want, 1e-6, 1e-2);
    }
}

/// Drafts closer than this to their runner-up (in torch's logits) may go either way.
const MARGIN: f64 = 1e-2;

/// The MTP layer against torch on the GGUF's weights: the first draft's logits after each
/// golden prompt and its greedy next token, and the chained drafts (compared up to the first
/// near tie, [`MARGIN`]).
async fn mtp_matches_torch() {
    let golden: serde_json::Value = serde_json::from_str(GLM_MTP_GOLDEN).unwrap();
    let m = load(GLM_MTP).await;
    // The longest prompt (31) and its rounds (3 tokens each).
    // torch's goldens are f32 throughout: an f32 KV cache.
    let opts = options(80, KvType::F32);
    let mut s = Session::new(m.model.clone(), opts).await.unwrap();
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    for case in golden["cases"].as_array().unwrap() {
        let prompt = ids(&case["prompt_tokens"]);
        let name = format!("prompt of {}", prompt.len());
        s.truncate(0);
        let (next, _) = s
            .mtp_prefill(&prompt, &mut Sampler::greedy())
            .await
            .unwrap();
        assert_eq!(next, case["next_token"].as_u64().unwrap() as u32, "{name}");
        let logits = s.mtp_draft_logits(next).await.unwrap();
        let want: Vec<f32> = case["mtp_logits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        // SwiftShader's sin/cos (RoPE) are off by ~1e-4 (kernels::tests::ROPE_TOL), which
        // three layers grow to 5.1e-3 on the 31-token prompt in Chromium (4.98e-3 before the
        // grouped attention changed its sums' order; lavapipe 2.5e-3); a wrong concatenation,
        // norm or position is off by O(1).
        assert_close("mtp logits", &name, &logits, &want, 1e-6, 1e-2);
        let want_drafts = ids(&case["drafts"]);
        // Drafts chained on the GPU, up to the first near tie.
        let margins = case["margins"].as_array().unwrap();
        let sure = margins
            .iter()
            .take_while(|m| m.as_f64().unwrap() >= MARGIN)
            .count();
        if sure > 0 {
            assert_eq!(reference::argmax(&logits), want_drafts[0], "{name}");
        }
        s.truncate(0);
        let (next, _) = s
            .mtp_prefill(&prompt, &mut Sampler::greedy())
            .await
            .unwrap();
        let mut greedy = Sampler::greedy();
        let (drafts, ..) = s
            .mtp_round(next, want_drafts.len(), &mut greedy)
            .await
            .unwrap();
        assert_eq!(
            drafts[..sure],
            want_drafts[..sure],
            "{name}: chained drafts"
        );
        // Round after round (two drafts each), the first draft is the MTP layer's pick at that
        // pair along the greedy continuation, whatever was accepted before: the MTP cache stays
        // in step through verification and roll-back. Compared while the tokens are torch's.
        let continuation = ids(&case["continuation"]);
        let forced = ids(&case["forced_drafts"]);
        let forced_margins = case["forced_margins"].as_array().unwrap();
        s.truncate(0);
        let (mut last, _) = s
            .mtp_prefill(&prompt, &mut Sampler::greedy())
            .await
            .unwrap();
        let mut generated = vec![last];
        let mut checked = 0;
        loop {
            let i = s.pos() as usize - prompt.len();
            if i >= forced.len() || generated[..] != continuation[..generated.len()] {
                break;
            }
            let (drafts, k, next) = s.mtp_round(last, 2, &mut greedy).await.unwrap();
            if forced_margins[i].as_f64().unwrap() >= MARGIN {
                assert_eq!(
                    drafts[0], forced[i],
                    "{name}: first draft of the round at {i}"
                );
                checked += 1;
            }
            generated.extend_from_slice(&drafts[..k]);
            generated.push(next);
            last = next;
        }
        assert!(checked >= 3, "{name}: only {checked} rounds compared");
    }
}

/// An MTP draft step is a short fixed list: the embedding, the two input norms, eh_proj, the
/// block (QKV, attention with RoPE and the KV store, output; router matvec, expert gate/up with
/// the top-k in its prologue, down, the shared expert's 2), the head's norm and matvec, the
/// argmax's 2 stages.
async fn an_mtp_draft_step_is_a_short_fixed_list() {
    let m = load(GLM_MTP).await;
    let s = session(&m).await;
    assert_eq!(
        s.dispatches_per_draft(),
        Some(1 + 2 + 1 + 3 + 3 + 2 + 2 + 2)
    );
    let llama = load(LLAMA).await;
    assert_eq!(session(&llama).await.dispatches_per_draft(), None);
}

/// `verify` returns the greedy token after each fed token: feeding the greedy continuation
/// gives that continuation shifted by one, after a wrong token the argmax of the logits there,
/// and too many tokens for one pass is an error.
async fn verify_gives_the_greedy_token_after_each_row() {
    let m = load(GLM_MTP).await;
    let mut s = session(&m).await;
    let prompt = [4u32, 99, 250, 17];
    let mut g = Sampler::greedy();
    let mut seq = vec![s.prefill(&prompt, &mut g).await.unwrap()];
    for _ in 0..6 {
        seq.push(s.decode_last(&mut g).await.unwrap());
    }
    let p = prompt.len() as u32;
    s.truncate(p);
    assert_eq!(s.verify(&seq[..6]).await.unwrap(), seq[1..7]);
    assert_eq!(s.pos(), p + 6);
    s.truncate(p + 2);
    let wrong = (seq[2] + 1) % m.model.config.n_vocab;
    let got = s.verify(&[wrong, seq[3]]).await.unwrap();
    s.truncate(p + 2);
    let logits = s.eval(&[wrong], 1).await.unwrap();
    assert_eq!(got[0], reference::argmax(&logits), "after a wrong token");
    s.truncate(0);
    let many = vec![1u32; s.max_verify() as usize + 1];
    assert!(s.verify(&many).await.is_err());
}

/// A verification deep in the context, where its attention is split into parts: each row's
/// logits are the decode steps', on the MTP fixture (Q8_0, heads of 32).
async fn a_verification_deep_in_the_context_is_decode_steps() {
    let m = load(GLM_MTP).await;
    let mut s = session_of(&m, 160).await;
    let n_vocab = m.model.config.n_vocab;
    let prompt: Vec<u32> = (0..100u32)
        .map(|j| 3 + (j * 104_729 + j * j * 31) % (n_vocab - 3))
        .collect();
    let fed = [7u32, 300, 41, 250, 9, 77, 123, 401];
    s.prefill(&prompt, &mut Sampler::greedy()).await.unwrap();
    let p = s.pos();
    let mut decode = Vec::new();
    for &t in &fed {
        decode.extend(s.eval(&[t], 1).await.unwrap());
    }
    for n in [2usize, 5, 8] {
        s.truncate(p);
        let got = s.eval(&fed[..n], n as u32).await.unwrap();
        let want = &decode[..n * n_vocab as usize];
        let case = format!("{n} tokens after {p}");
        assert_close("verification logits", &case, &got, want, 1e-6, 0.01);
    }
}

/// The speculative-sampling rule on the CPU against the exact distributions: the first token of
/// a step has the target's distribution at row 0 whatever the draft (the likeliest, an unlikely
/// one, one the chain cuts), and the second, after the first draft stands, row 1's.
async fn accept_sampled_keeps_the_targets_distribution() {
    let n_vocab = 10;
    // Rows after the last token, after draft 1 and after draft 2.
    let rows = crate::kernels::tests::random_f32(77, 3 * n_vocab, 2.0);
    let exact = |row: &[f32], history: &[u32], params: &SamplerParams| {
        let c = crate::sampling::candidates(row, history, params);
        let total: f32 = c.iter().map(|x| x.1).sum();
        let mut p = vec![0.0f64; n_vocab];
        for (id, w) in c {
            p[id as usize] = (w / total) as f64;
        }
        p
    };
    let params = |top_k| SamplerParams {
        temperature: 0.9,
        top_k,
        top_p: 1.0,
        min_p: 0.0,
        seed: 5,
        ..Default::default()
    };
    let history = [3u32, 4];
    let best = reference::argmax(&rows[..n_vocab]);
    let worst = (0..n_vocab as u32)
        .min_by(|&a, &b| rows[a as usize].total_cmp(&rows[b as usize]))
        .unwrap();
    for (name, top_k, d1) in [
        ("likeliest draft", 0, best),
        ("unlikely draft", 0, worst),
        ("draft cut by top-k", 3, worst),
    ] {
        let p = params(top_k);
        let p0 = exact(&rows[..n_vocab], &history, &p);
        let p1 = exact(&rows[n_vocab..2 * n_vocab], &[3, 4, d1], &p);
        let mut sampler = Sampler::new(p.clone());
        let n = 100_000;
        let (mut first, mut second, mut after_d1) =
            (vec![0usize; n_vocab], vec![0usize; n_vocab], 0);
        for _ in 0..n {
            let (k, next) = super::accept_sampled(&rows, &[d1, 0], &history, &mut sampler);
            let t0 = if k >= 1 { d1 } else { next };
            first[t0 as usize] += 1;
            if k >= 1 {
                let t1 = if k >= 2 { 0 } else { next };
                second[t1 as usize] += 1;
                after_d1 += 1;
            }
        }
        for t in 0..n_vocab {
            let f0 = first[t] as f64 / n as f64;
            assert!(
                (f0 - p0[t]).abs() < 0.01,
                "{name}: token {t} first {f0} vs {}",
                p0[t]
            );
            if after_d1 > 10_000 {
                let f1 = second[t] as f64 / after_d1 as f64;
                assert!(
                    (f1 - p1[t]).abs() < 0.02,
                    "{name}: token {t} second {f1} vs {}",
                    p1[t]
                );
            }
        }
    }
}

/// With sampling, the tokens have the distribution they have without speculation, on the GPU
/// end to end (a draft model, the MTP layer): the first token (the prompt pass's) and the
/// second (a speculative step's) of 120 seeded generations each way, by a two-sample
/// chi-square test (df + 1 = the tokens seen).
async fn sampled_speculation_keeps_the_distribution() {
    let llama = load(LLAMA).await;
    let mtp = load(GLM_MTP).await;
    let mut own = session(&llama).await;
    for (target, mut drafter) in [(&llama, Drafter::Model(&mut own)), (&mtp, Drafter::Mtp)] {
        let is_own = matches!(drafter, Drafter::Model(_));
        let mut plain = session(target).await;
        let mut spec = session(target).await;
        // Counts of the first token (from the prompt pass) and the second (the first a
        // speculative step makes), without and with speculation.
        let mut counts = [[[0f64; 512]; 2]; 2];
        let mut accepted = 0;
        for seed in 0..120u64 {
            let opts = GenerateOptions {
                max_tokens: 3,
                stop_at_eog: false,
                // Flat enough that greedy and sampled tokens differ (the fixtures' logit margins
                // are wide): the 4 likeliest at temperature 3, nothing else cut.
                sampling: SamplerParams {
                    temperature: 3.0,
                    top_k: 4,
                    top_p: 1.0,
                    min_p: 0.0,
                    seed,
                    ..Default::default()
                },
                draft_max: 1,
                draft_adaptive: false,
                guard: None,
            };
            let t = &target.tokenizer;
            let prompt = [1u32, 40, 300];
            let want = generate_with(&mut plain, None, t, &prompt, &opts, |_| true)
                .await
                .unwrap();
            let got = generate_with(&mut spec, Some(&mut drafter), t, &prompt, &opts, |_| true)
                .await
                .unwrap();
            for i in 0..2 {
                counts[i][0][want.tokens[i] as usize] += 1.0;
                counts[i][1][got.tokens[i] as usize] += 1.0;
            }
            let s = got.speculation.unwrap();
            assert_eq!(s.accepted + s.passes, got.tokens.len() - 1);
            accepted += s.accepted;
        }
        for (i, [a, b]) in counts.iter().enumerate() {
            let (chi2, seen) = a
                .iter()
                .zip(b)
                .filter(|(x, y)| *x + *y > 0.0)
                .fold((0.0, 0), |(c, n), (x, y)| {
                    (c + (x - y).powi(2) / (x + y), n + 1)
                });
            // The 99.9% quantiles of chi-square with 1 to 20 degrees of freedom (seen - 1).
            const Q999: [f64; 20] = [
                10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59, 31.26, 32.91,
                34.53, 36.12, 37.70, 39.25, 40.79, 42.31, 43.82, 45.31,
            ];
            let bound = Q999[(seen.max(2) - 2).min(19)];
            assert!(
                chi2 < bound,
                "token {i}: chi-square {chi2:.2} over {seen} tokens: {a:?} vs {b:?}"
            );
        }
        // The target drafting for itself: its argmax is often drawn (the MTP fixture's drafts
        // are rarely among the top 4).
        assert!(!is_own || accepted > 0, "no draft accepted");
    }
}

gpu_tests!(
    accept_sampled_keeps_the_targets_distribution,
    sampled_speculation_keeps_the_distribution,
    a_draft_model_identical_to_the_target_is_always_accepted,
    a_different_draft_model_changes_nothing,
    the_draft_length_adapts_to_the_acceptance,
    mtp_changes_nothing,
    plain_steps_between_rounds_change_nothing,
    the_guard_goes_on_from_the_last_request,
    mtp_reuses_a_conversations_prefix,
    mtp_catches_up_after_plain_steps,
    mtp_keeps_the_pairs_of_plain_steps,
    mtp_matches_torch,
    verify_gives_the_greedy_token_after_each_row,
    a_verification_deep_in_the_context_is_decode_steps,
    an_mtp_draft_step_is_a_short_fixed_list,
);
