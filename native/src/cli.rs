//! The commands: run, chat, perplexity, info (bench is in bench.rs).

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use serde_json::json;
use tandem_engine::generate::{generate, GenerateOptions};
use tandem_engine::model::{perplexity as measure_perplexity, Config};
use tandem_engine::sampling::SamplerParams;
use tandem_engine::tokenizer::ChatMessage;
use tandem_engine::{Error, Result};

use crate::load::{self, Loaded};

#[derive(Parser)]
#[command(
    name = "tandem",
    version,
    about = "Run GGUF language models on the GPU (wgpu: Vulkan, Metal, DX12)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Generate text from a prompt, streaming it to stdout.
    Run(RunArgs),
    /// Chat with the model in the terminal, using its chat template.
    Chat(ChatArgs),
    /// Measure perplexity on a text file (llama-perplexity's method).
    Perplexity(PerplexityArgs),
    /// Show what is in a GGUF file and whether this GPU can run it.
    Info(InfoArgs),
    /// Time prefill and decode over distinct prompts, and the kernels of one token.
    Bench(crate::bench::BenchArgs),
}

#[derive(Args, Clone)]
pub struct ModelArgs {
    /// GGUF model file [default: SmolLM2-135M-Instruct in the model cache, see scripts/fetch-models.sh]
    #[arg(short, long)]
    pub model: Option<PathBuf>,
    /// Context size in tokens [default: the model's, at most 4096]
    #[arg(short = 'c', long)]
    pub ctx: Option<u32>,
    /// Most tokens per forward pass when reading a prompt
    #[arg(long, default_value_t = 256)]
    pub ubatch: u32,
    /// Use the adapter's software fallback (lavapipe, SwiftShader) instead of a GPU
    #[arg(long)]
    pub software: bool,
    /// Use only the portable kernels (no shader-f16, no subgroups), as in a browser without them
    #[arg(long)]
    pub portable: bool,
    /// Print nothing but the result (no adapter line, no progress bar, no speeds)
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The prompt text
    #[arg(short, long)]
    pub prompt: String,
    /// Treat the prompt as one user message in the model's chat template
    #[arg(long)]
    pub chat: bool,
    /// A system message (with --chat)
    #[arg(long)]
    pub system: Option<String>,
    /// Most tokens to generate
    #[arg(short = 'n', long = "max-tokens", default_value_t = 256)]
    pub max_tokens: usize,
    /// Keep generating past end-of-generation tokens
    #[arg(long)]
    pub ignore_eos: bool,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Print one JSON object at the end (text, tokens, prompt_tokens, speeds)
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// A system message for the conversation
    #[arg(long)]
    pub system: Option<String>,
    /// Most tokens per answer
    #[arg(short = 'n', long = "max-tokens", default_value_t = 1024)]
    pub max_tokens: usize,
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

#[derive(Args, Clone)]
pub struct SamplingArgs {
    /// Sampling temperature; 0 is greedy (argmax) decoding
    #[arg(long, visible_alias = "temp", default_value_t = 0.8)]
    pub temperature: f32,
    /// Keep the K most likely tokens (0: off; the GPU sampler keeps at most 64)
    #[arg(long, default_value_t = 40)]
    pub top_k: u32,
    /// Keep the most likely tokens whose probabilities add up to P (1: off)
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    /// Drop tokens less likely than P times the most likely one (0: off)
    #[arg(long, default_value_t = 0.05)]
    pub min_p: f32,
    /// Penalise tokens among the last --repeat-last-n (1: off)
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    /// How many recent tokens the repetition penalty looks at (at most 256)
    #[arg(long, default_value_t = 64)]
    pub repeat_last_n: u32,
    /// Random seed [default: from the clock]
    #[arg(long)]
    pub seed: Option<u64>,
}

impl SamplingArgs {
    fn params(&self) -> SamplerParams {
        SamplerParams {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: self.repeat_last_n,
            seed: self.seed.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64)
            }),
        }
    }
}

#[derive(Args)]
pub struct PerplexityArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The text file to score
    #[arg(short, long)]
    pub file: PathBuf,
    /// Tokens per chunk (the second half of each chunk is scored)
    #[arg(long = "chunk-ctx", visible_alias = "ppl-ctx", default_value_t = 512)]
    pub chunk_ctx: u32,
    /// Score only the first K chunks
    #[arg(long)]
    pub chunks: Option<usize>,
    /// Print one JSON object with perplexity and scored_tokens
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct InfoArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Also list every tensor
    #[arg(long)]
    pub tensors: bool,
}

/// The prompt's token ids: raw text (BOS where the model asks for it), or a chat turn.
fn prompt_tokens(l: &Loaded, messages: &[ChatMessage], raw: Option<&str>) -> Result<Vec<u32>> {
    match raw {
        Some(text) => l.tokenizer.encode(text, true, false),
        None => {
            let template = l.tokenizer.chat_template_renderer().ok_or_else(|| {
                Error::Template(
                    "this model has no chat template (a base model?); run without --chat".into(),
                )
            })??;
            let text = template.render(messages, true)?;
            l.tokenizer.encode(&text, false, true)
        }
    }
}

pub fn run(args: RunArgs) -> Result<()> {
    let mut l = load::load(&args.model)?;
    let tokens = if args.chat {
        let mut messages = Vec::new();
        if let Some(s) = &args.system {
            messages.push(ChatMessage::new("system", s));
        }
        messages.push(ChatMessage::new("user", &args.prompt));
        prompt_tokens(&l, &messages, None)?
    } else {
        prompt_tokens(&l, &[], Some(&args.prompt))?
    };
    let opts = GenerateOptions {
        max_tokens: args.max_tokens,
        stop_at_eog: !args.ignore_eos,
        sampling: args.sampling.params(),
    };
    let mut stdout = std::io::stdout();
    let streaming = !args.json;
    let g = pollster::block_on(generate(
        &mut l.session,
        &l.tokenizer,
        &tokens,
        &opts,
        |piece| {
            if streaming {
                let _ = stdout.write_all(piece.as_bytes());
                let _ = stdout.flush();
            }
        },
    ))?;
    if args.json {
        let out = json!({
            "text": g.text,
            "tokens": g.tokens,
            "prompt_tokens": tokens,
            "prefill_tokens_per_second": g.prefill_tokens_per_second(),
            "decode_tokens_per_second": g.decode_tokens_per_second(),
            "dispatches_per_token": l.session.dispatches_per_token(),
            "stop": format!("{:?}", g.stop),
        });
        println!("{out}");
    } else {
        println!();
    }
    if !args.model.quiet {
        eprintln!(
            "prompt {} tokens at {:.1} tok/s; generated {} tokens at {:.1} tok/s ({:?})",
            g.prefilled,
            g.prefill_tokens_per_second(),
            g.tokens.len(),
            g.decode_tokens_per_second(),
            g.stop
        );
    }
    Ok(())
}

pub fn chat(args: ChatArgs) -> Result<()> {
    let mut l = load::load(&args.model)?;
    let mut messages = Vec::new();
    if let Some(s) = &args.system {
        messages.push(ChatMessage::new("system", s));
    }
    // Fail now, not after the first message, when the model has no template.
    prompt_tokens(&l, &[ChatMessage::new("user", "hi")], None)?;
    eprintln!("Chat with the model; /reset starts over, /exit or Ctrl-D leaves.");
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    loop {
        eprint!("> ");
        let mut line = String::new();
        if stdin
            .lock()
            .read_line(&mut line)
            .map_err(|e| Error::io("stdin", e))?
            == 0
        {
            eprintln!();
            return Ok(());
        }
        let line = line.trim();
        match line {
            "" => continue,
            "/exit" | "/quit" => return Ok(()),
            "/reset" => {
                messages.retain(|m: &ChatMessage| m.role == "system");
                l.session.truncate(0);
                continue;
            }
            _ => {}
        }
        messages.push(ChatMessage::new("user", line));
        let tokens = prompt_tokens(&l, &messages, None)?;
        let opts = GenerateOptions {
            max_tokens: args.max_tokens,
            stop_at_eog: true,
            sampling: args.sampling.params(),
        };
        let g = pollster::block_on(generate(
            &mut l.session,
            &l.tokenizer,
            &tokens,
            &opts,
            |p| {
                let _ = stdout.write_all(p.as_bytes());
                let _ = stdout.flush();
            },
        ));
        let g = match g {
            Ok(g) => g,
            Err(e @ Error::ContextOverflow { .. }) => {
                eprintln!("\n{e}\n(use /reset to start a new conversation)");
                messages.pop();
                continue;
            }
            Err(e) => return Err(e),
        };
        println!();
        eprintln!(
            "[{} tokens at {:.1} tok/s]",
            g.tokens.len(),
            g.decode_tokens_per_second()
        );
        messages.push(ChatMessage::new("assistant", g.text.trim()));
    }
}

pub fn perplexity(args: PerplexityArgs) -> Result<()> {
    let mut model_args = args.model.clone();
    // One chunk's second half must come out of one pass.
    model_args.ubatch = model_args.ubatch.max(args.chunk_ctx);
    model_args.ctx = Some(model_args.ctx.unwrap_or(args.chunk_ctx).max(args.chunk_ctx));
    let mut l = load::load(&model_args)?;
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| Error::io(args.file.display().to_string(), e))?;
    let tokens = l.tokenizer.encode(&text, false, false)?;
    let bos = if l.tokenizer.add_bos() {
        l.tokenizer.bos()
    } else {
        None
    };
    let quiet = args.model.quiet || args.json;
    let p = pollster::block_on(measure_perplexity(
        &mut l.session,
        &tokens,
        args.chunk_ctx,
        args.chunks,
        bos,
        |c, n, running| {
            if !quiet {
                eprintln!("chunk {}/{n}: running perplexity {running:.4}", c + 1);
            }
        },
    ))?;
    if args.json {
        println!(
            "{}",
            json!({"perplexity": p.value, "scored_tokens": p.scored_tokens, "chunk_ctx": args.chunk_ctx})
        );
    } else {
        println!("perplexity: {:.4}", p.value);
        eprintln!("({} tokens scored)", p.scored_tokens);
    }
    Ok(())
}

pub fn info(args: InfoArgs) -> Result<()> {
    let path = load::model_path(&args.model.model)?;
    let (src, g) = load::open_gguf(&path)?;
    use tandem_engine::gguf::ByteSource;
    println!(
        "file: {} ({:.1} MB)",
        path.display(),
        src.len() as f64 / 1e6
    );
    println!(
        "GGUF version {}, {} tensors, {} metadata keys",
        g.version,
        g.tensors.len(),
        g.metadata.len()
    );
    for key in [
        "general.name",
        "general.architecture",
        "general.size_label",
        "general.license",
    ] {
        if let Some(v) = g.get(key) {
            println!("{key}: {v}");
        }
    }
    let params: u64 = g.tensors.iter().map(|t| t.n_elements()).sum();
    println!("parameters: {:.1} M", params as f64 / 1e6);
    let mut types: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for t in &g.tensors {
        let e = types.entry(t.ty.name()).or_default();
        e.0 += 1;
        e.1 += t.n_bytes;
    }
    let types: Vec<String> = types
        .iter()
        .map(|(k, (n, b))| format!("{k} x{n} ({:.1} MB)", *b as f64 / 1e6))
        .collect();
    println!("tensor types: {}", types.join(", "));
    let config = Config::from_gguf(&g);
    match &config {
        Ok(c) => {
            println!(
                "layers {}, embedding {}, heads {}/{} KV of {}, FFN {}, vocabulary {}, trained context {}",
                c.n_layer, c.n_embd, c.n_head, c.n_kv_head, c.head_dim, c.n_ff, c.n_vocab, c.ctx_train
            );
            if let Some(w) = c.sliding_window {
                println!(
                    "sliding window {} (every {}th layer global)",
                    w.size, w.pattern
                );
            }
        }
        Err(e) => println!("not runnable by Tandem: {e}"),
    }
    match tandem_engine::tokenizer::Tokenizer::from_gguf(&g) {
        Ok(t) => println!(
            "tokenizer: {} tokens, BOS {:?}, EOS {:?}, chat template: {}",
            t.vocab_size(),
            t.bos(),
            t.eos(),
            if t.chat_template().is_some() {
                "yes"
            } else {
                "no"
            }
        ),
        Err(e) => println!("tokenizer: {e}"),
    }
    if args.tensors {
        for t in &g.tensors {
            println!("  {:40} {:>8} {:?}", t.name, t.ty.name(), t.dims);
        }
    }
    if let Ok(c) = config {
        let gpu = load::gpu(&ModelArgs {
            quiet: true,
            ..args.model.clone()
        })?;
        let unsupported: Vec<_> = g
            .tensors
            .iter()
            .filter(|t| t.dims.len() >= 2 && !t.ty.gpu_supported())
            .map(|t| format!("{} ({})", t.name, t.ty))
            .collect();
        let weights: u64 = g.tensors.iter().map(|t| t.n_bytes).sum();
        let ctx = args.model.ctx.unwrap_or(c.ctx_train.min(4096)) as u64;
        let kv = 2 * c.n_layer as u64 * c.n_kv_head as u64 * c.head_dim as u64 * ctx * 4;
        println!("adapter: {}", gpu.describe());
        println!(
            "GPU memory needed: {:.1} MB of weights + {:.1} MB of KV cache at context {ctx}",
            weights as f64 / 1e6,
            kv as f64 / 1e6
        );
        if unsupported.is_empty() {
            println!("this adapter can run it: yes");
        } else {
            println!(
                "this adapter can run it: no, unsupported tensor types: {}",
                unsupported.join(", ")
            );
        }
    }
    Ok(())
}
