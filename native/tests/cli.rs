//! The `tandem` binary end to end, on the tiny fixture model and on the default model.

use std::path::PathBuf;
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
}

fn tandem(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(args)
        .output()
        .unwrap()
}

/// `tandem run -q -m <fixture> -p <prompt> -n <n> --json <extra...>`, which must succeed: its JSON.
fn run_json(model: &str, prompt: &str, n: &str, extra: &[&str]) -> serde_json::Value {
    let model = fixture(model);
    let mut args = vec![
        "run",
        "-q",
        "-m",
        model.to_str().unwrap(),
        "-p",
        prompt,
        "-n",
        n,
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = tandem(&args);
    assert!(
        out.status.success(),
        "{extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `tandem bench -q -m FIXTURE --json ARGS`'s JSON (asserting success).
fn bench_json(model: &str, args: &[&str]) -> serde_json::Value {
    let model = fixture(model);
    let args = [
        &["bench", "-q", "-m", model.to_str().unwrap(), "--json"],
        args,
    ]
    .concat();
    let out = tandem(&args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn run_json_reports_tokens_and_speeds() {
    let v = run_json(
        "tiny-qwen3.gguf",
        "the quick brown fox",
        "5",
        &["--ignore-eos"],
    );
    assert_eq!(v["tokens"].as_array().unwrap().len(), 5);
    assert!(!v["prompt_tokens"].as_array().unwrap().is_empty());
    assert!(v["decode_tokens_per_second"].as_f64().unwrap() > 0.0);
    assert!(v["prefill_tokens_per_second"].as_f64().unwrap() > 0.0);
    assert!(v["dispatches_per_token"].as_u64().unwrap() > 0);
}

#[test]
fn prompt_longer_than_context_fails_cleanly() {
    let model = fixture("tiny-llama.gguf");
    let long = "word ".repeat(200);
    let out = tandem(&[
        "run",
        "-q",
        "-m",
        model.to_str().unwrap(),
        "-c",
        "32",
        "-p",
        &long,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("context holds 32"), "{err}");
}

#[test]
fn context_too_long_for_the_adapter_fails_cleanly() {
    // u32::MAX positions: no adapter's storage binding holds a layer's KV cache of that.
    let model = fixture("tiny-llama.gguf");
    let model = model.to_str().unwrap();
    let ctx = u32::MAX.to_string();
    let out = tandem(&["run", "-q", "-m", model, "-c", &ctx, "-p", "hi"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("KV cache") && err.contains("lower the context"),
        "{err}"
    );
    // `info` says so too, with the same reason.
    let out = tandem(&["info", "-m", model, "-c", &ctx]);
    assert!(out.status.success());
    let info = String::from_utf8_lossy(&out.stdout);
    assert!(
        info.contains("this adapter can run it: no: ") && info.contains("lower the context"),
        "{info}"
    );
}

#[test]
fn bad_file_fails_cleanly() {
    let dir = std::env::temp_dir().join(format!("tandem-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.gguf");
    std::fs::write(&bad, b"GGUF\x03\x00\x00\x00garbage").unwrap();
    let out = tandem(&["run", "-q", "-m", bad.to_str().unwrap(), "-p", "hi"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
    let out = tandem(&["info", "-m", fixture("tiny-gemma3.gguf").to_str().unwrap()]);
    assert!(out.status.success());
    let info = String::from_utf8_lossy(&out.stdout);
    assert!(
        info.contains("gemma3") && info.contains("sliding window 8"),
        "{info}"
    );
}

#[test]
fn default_model_answers_the_capital_of_france() {
    let out = tandem(&[
        "run",
        "-q",
        "--chat",
        "-p",
        "What is the capital of France?",
        "--temperature",
        "0",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "The capital of France is Paris."
    );
}

/// `tandem chat` at its default sampling (no sampling flag), two fresh conversations, each turn
/// with its own random stream (the seed plus the turn): every answer names Paris.
#[test]
fn chat_defaults_answer_the_capital_of_france() {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(["chat", "-q", "-n", "16", "--seed", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let q = "What is the capital of France?\n/reset\n";
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(q.repeat(2).as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let answers: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(answers.len(), 2, "{text}");
    assert!(answers.iter().all(|a| a.contains("Paris")), "{text}");
}

/// Raw text samples with llama.cpp's defaults, a chat turn with the chat defaults (the tiny
/// fixture recommends no sampling); a flag overrides either.
#[test]
fn run_reports_the_sampling_it_used() {
    let sampling = |extra: &[&str]| {
        let args = [&["--seed", "3"], extra].concat();
        run_json("tiny-llama.gguf", "the", "1", &args)["sampling"].clone()
    };
    let raw = sampling(&[]);
    assert_eq!(raw["temperature"], 0.8);
    assert_eq!(raw["top_k"], 40);
    assert_eq!(raw["seed"], 3);
    assert_eq!(sampling(&["--top-k", "5"])["top_k"], 5);
}

/// As llama-perplexity's -c: the chunk size.
#[test]
fn perplexity_ctx_is_the_chunk_size() {
    let dir = std::env::temp_dir().join(format!("tandem-cli-ppl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("text.txt");
    std::fs::write(
        &text,
        "the quick brown fox jumps over the lazy dog. ".repeat(20),
    )
    .unwrap();
    let model = fixture("tiny-llama.gguf");
    let out = tandem(&[
        "perplexity",
        "-m",
        model.to_str().unwrap(),
        "-f",
        text.to_str().unwrap(),
        "-c",
        "32",
        "--chunks",
        "2",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["chunk_ctx"], 32);
    // Two chunks, the second half of each scored (as llama-perplexity: its last 15 predictions).
    assert_eq!(v["scored_tokens"], 2 * (32 / 2 - 1));
}

/// On a machine without a display, a start prints nothing a user cannot act on (no
/// "XDG_RUNTIME_DIR is invalid" from a Wayland probe).
#[test]
fn no_display_noise_on_stderr() {
    let out = Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(["info", "-m", fixture("tiny-llama.gguf").to_str().unwrap()])
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("WAYLAND_SOCKET")
        .env_remove("NODEVICE_SELECT")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn sampling_is_reproducible_with_a_seed() {
    let model = fixture("tiny-llama.gguf");
    let m = model.to_str().unwrap();
    let run = |seed: &str| {
        let out = tandem(&[
            "run",
            "-q",
            "-m",
            m,
            "-p",
            "the",
            "-n",
            "12",
            "--ignore-eos",
            "--json",
            "--temperature",
            "1.5",
            "--top-k",
            "0",
            "--top-p",
            "1",
            "--min-p",
            "0",
            "--seed",
            seed,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["tokens"].clone()
    };
    assert_eq!(run("42"), run("42"));
    assert_ne!(run("42"), run("43"));
}

#[test]
fn chat_keeps_the_conversation() {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(["chat", "-q", "--temperature", "0", "-n", "24"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"What is the capital of France?\nAnd of Germany?\n/exit\n")
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let answers: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(answers[0].contains("Paris"), "{text}");
    assert!(
        answers.iter().skip(1).any(|a| a.contains("Berlin")),
        "{text}"
    );
}

#[test]
fn bench_json_keeps_its_keys() {
    // The object `tandem bench --json` prints and the npm package's `engine.bench` returns (one
    // implementation, engine/src/bench.rs); web/tests/node-api.mjs checks the same keys.
    let args = [
        "--prompts",
        "2",
        "-p",
        "4",
        "-n",
        "3",
        "--profile",
        "--pass-tokens",
        "2,4",
    ];
    let v = bench_json("tiny-llama.gguf", &args);
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "adapter",
            "decode_tokens_per_second",
            "dispatches_per_token",
            "gen_tokens",
            "kernels",
            "passes",
            "prefill_tokens_per_second",
            "profile_tokens",
            "prompt_tokens",
            "prompts",
            "streaming_read_ceiling",
        ]
    );
    for k in ["prefill_tokens_per_second", "decode_tokens_per_second"] {
        for s in ["median", "min", "max"] {
            let x = v[k][s].as_f64().unwrap();
            assert!(x.is_finite() && x > 0.0, "{k}.{s} = {x}");
        }
    }
    assert_eq!(v["prompts"], 2);
    assert_eq!(v["streaming_read_ceiling"]["kernel"], "stream_read");
    let kernels = v["kernels"].as_object().unwrap();
    let passes = v["passes"].as_array().unwrap();
    if v["streaming_read_ceiling"]["bytes_per_second"].is_null() {
        assert!(kernels.is_empty());
        assert!(passes.is_empty());
    } else {
        // A one-token pass first, the base of every ratio, then the asked-for counts.
        let tokens: Vec<u64> = passes
            .iter()
            .map(|p| p["tokens"].as_u64().unwrap())
            .collect();
        assert_eq!(tokens, [1, 2, 4]);
        assert_eq!(passes[0]["of_decode_pass"], 1.0);
        for p in passes {
            for k in ["microseconds", "bytes"] {
                let x = p[k].as_f64().unwrap();
                assert!(x.is_finite() && x > 0.0, "{p}");
            }
        }
        let n: u64 = kernels
            .values()
            .map(|g| g["dispatches"].as_u64().unwrap())
            .sum();
        assert_eq!(n, v["dispatches_per_token"].as_u64().unwrap());
        let g = kernels.values().next().unwrap().as_object().unwrap();
        let gk: Vec<&str> = g.keys().map(|k| k.as_str()).collect();
        assert_eq!(
            gk,
            [
                "bytes",
                "dispatches",
                "flops",
                "gigabytes_per_second",
                "microseconds",
                "percent_of_ceiling",
                "percent_of_pass",
                "teraflops_per_second",
            ]
        );
    }
    // Without --profile: no ceiling, no kernels.
    let v = bench_json("tiny-llama.gguf", &["--prompts", "1", "-p", "4", "-n", "2"]);
    assert!(v["streaming_read_ceiling"].is_null());
    assert!(v["kernels"].as_object().unwrap().is_empty());
    assert!(v["passes"].as_array().unwrap().is_empty());
}

/// `bench` on a model with an MTP layer speculates by default and says what the drafts did; with
/// `--speculative off` the key is absent, as on any model without a drafter.
#[test]
fn bench_reports_the_speculation() {
    let bench = |extra: &[&str]| {
        let args = [&["--prompts", "2", "-p", "6", "-n", "9"], extra].concat();
        bench_json("tiny-glm4moe-mtp.gguf", &args)
    };
    let s = &bench(&[])["speculation"];
    let (drafted, accepted) = (
        s["draft_tokens"].as_u64().unwrap(),
        s["accepted_tokens"].as_u64().unwrap(),
    );
    assert!(drafted > 0 && accepted <= drafted, "{s}");
    let rate = s["acceptance_rate"].as_f64().unwrap();
    assert!((rate - accepted as f64 / drafted as f64).abs() < 1e-9);
    assert!(s["tokens_per_pass"].as_f64().unwrap() >= 1.0);
    // The warm-up and the two requests share the session's guard: plain steps may follow its
    // first window (run_times_plain_steps_against_the_speculation checks them).
    assert!(s["plain_tokens"].as_u64().is_some(), "{s}");
    assert!(bench(&["--speculative", "off"])
        .get("speculation")
        .is_none());
}

/// `bench --prompt-file` feeds the file's lines as the prompts (one a line, blank lines skipped)
/// and reports the longest; a file with no prompt is refused with a message.
#[test]
fn bench_takes_text_prompts() {
    let model = fixture("tiny-glm4moe-mtp.gguf");
    let file = std::env::temp_dir().join(format!("tandem-prompts-{}.txt", std::process::id()));
    let bench = |text: &str| {
        std::fs::write(&file, text).unwrap();
        tandem(&[
            "bench",
            "-q",
            "-m",
            model.to_str().unwrap(),
            "--prompt-file",
            file.to_str().unwrap(),
            "-n",
            "6",
            "--json",
        ])
    };
    let out = bench("the quick brown fox\n\njumps over\nthe lazy dog and the quick cat\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["prompts"], 3);
    let longest = v["prompt_tokens"].as_u64().unwrap();
    assert!((7..=40).contains(&longest), "{v}");
    assert!(
        v["speculation"]["draft_tokens"].as_u64().unwrap() > 0,
        "{v}"
    );
    let out = bench("\n  \n");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no prompts in it"), "{err}");
    std::fs::remove_file(&file).unwrap();
}

/// `run --json` with speculation: the same tokens as without, and its keys; MTP by default on a
/// model with an MTP layer, a draft model with --draft.
#[test]
fn run_json_reports_the_speculation() {
    let run = |model: &str, extra: &[&str]| {
        let args = [&["--temperature", "0", "--ignore-eos"], extra].concat();
        run_json(model, "the quick brown fox", "12", &args)
    };
    let plain = run("tiny-glm4moe-mtp.gguf", &["--speculative", "off"]);
    assert_eq!(plain["speculative"], "off");
    assert!(plain["draft_tokens"].is_null());
    let mtp = run("tiny-glm4moe-mtp.gguf", &["--draft-max", "4"]);
    assert_eq!(mtp["speculative"], "mtp");
    assert_eq!(mtp["tokens"], plain["tokens"]);
    let drafted = mtp["draft_tokens"].as_u64().unwrap();
    let accepted = mtp["accepted_tokens"].as_u64().unwrap();
    assert!(drafted > 0 && accepted <= drafted);
    let rate = mtp["acceptance_rate"].as_f64().unwrap();
    assert!((rate - accepted as f64 / drafted as f64).abs() < 1e-9);
    assert!(mtp["tokens_per_pass"].as_f64().unwrap() >= 1.0);
    assert!(mtp["dispatches_per_draft"].as_u64().unwrap() > 0);
    // The target as its own draft model: everything accepted.
    let own = fixture("tiny-llama.gguf");
    let draft = run("tiny-llama.gguf", &["--draft", own.to_str().unwrap()]);
    let plain = run("tiny-llama.gguf", &[]);
    assert_eq!(draft["speculative"], "draft");
    assert_eq!(draft["tokens"], plain["tokens"]);
    assert_eq!(draft["acceptance_rate"].as_f64(), Some(1.0));
    assert!(draft["dispatches_per_draft"].is_null(), "no MTP layer");
    assert_eq!(
        draft["plain_tokens"], 0,
        "12 tokens: no window of plain steps yet"
    );
}

/// Longer generations time plain steps against the speculation (a window of plain steps after
/// the first of speculation, whichever wins), with the same tokens, in `run` and in each of
/// `bench`'s requests; `--always-speculate` never hands over.
#[test]
fn run_times_plain_steps_against_the_speculation() {
    let own = fixture("tiny-llama.gguf");
    let run = |extra: &[&str]| {
        let args = [&["--temperature", "0", "--ignore-eos"], extra].concat();
        run_json("tiny-llama.gguf", "the quick brown fox", "48", &args)
    };
    let plain = run(&["--speculative", "off"]);
    let guarded = run(&["--draft", own.to_str().unwrap()]);
    assert_eq!(guarded["tokens"], plain["tokens"]);
    assert!(guarded["plain_tokens"].as_u64().unwrap() >= 16, "{guarded}");
    let always = run(&["--draft", own.to_str().unwrap(), "--always-speculate"]);
    assert_eq!(always["tokens"], plain["tokens"]);
    assert_eq!(always["plain_tokens"], 0);
    assert_eq!(always["acceptance_rate"].as_f64(), Some(1.0));
    let bench = |extra: &[&str]| {
        let draft = ["--draft", own.to_str().unwrap()];
        let args = [
            &["--prompts", "2", "-p", "6", "-n", "48"],
            &draft[..],
            extra,
        ]
        .concat();
        bench_json("tiny-llama.gguf", &args)["speculation"].clone()
    };
    let guarded = bench(&[]);
    assert!(guarded["plain_tokens"].as_u64().unwrap() >= 32, "{guarded}");
    assert_eq!(bench(&["--always-speculate"])["plain_tokens"], 0);
}

/// Speculation the model or the flags cannot give fails with what to do.
#[test]
fn speculation_errors_say_what_to_do() {
    let model = fixture("tiny-llama.gguf");
    let smollm2 = tandem_engine::platform::model_dir().join("SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(smollm2.exists(), "run scripts/fetch-models.sh");
    for (extra, want) in [
        (vec!["--speculative", "mtp"], "no MTP layer"),
        (vec!["--speculative", "draft"], "--draft PATH"),
        // Another tokenizer, refused from its header.
        (vec!["--draft", smollm2.to_str().unwrap()], "same tokenizer"),
    ] {
        let mut args = vec!["run", "-q", "-m", model.to_str().unwrap(), "-p", "hi"];
        args.extend_from_slice(&extra);
        let out = tandem(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(want),
            "{extra:?}: {err}"
        );
    }
}
