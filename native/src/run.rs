//! `tandem run` (a prompt to text) and `tandem chat` (a conversation in the terminal).

use std::io::{BufRead, Write};

use clap::Args;
use serde_json::json;
use tandem_engine::generate::{generate_with, GenerateOptions};
use tandem_engine::sampling::Mode;
use tandem_engine::tokenizer::{ChatMessage, ChatTemplate, Tokenizer};
use tandem_engine::{Error, Result};

use crate::args::{ModelArgs, SamplingArgs};
use crate::load::{self, Loaded};
use crate::speculate::{SpecArgs, Speculator};

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The prompt text
    #[arg(short, long)]
    pub prompt: String,
    /// Treat the prompt as one user message in the model's chat template (and sample with the
    /// chat defaults)
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
    #[command(flatten)]
    pub speculative: SpecArgs,
    /// Print one JSON object at the end (text, tokens, prompt_tokens, speeds, sampling,
    /// speculation)
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
    #[command(flatten)]
    pub speculative: SpecArgs,
}

/// The prompt's token ids: raw text (BOS where the model asks for it), or a chat turn.
fn prompt_tokens(l: &Loaded, messages: &[ChatMessage], raw: Option<&str>) -> Result<Vec<u32>> {
    match raw {
        Some(text) => l.tokenizer.encode(text, true, false),
        None => chat_tokens(&l.tokenizer, &template(&l.tokenizer)?, messages),
    }
}

/// The model's chat template, or an error saying it has none.
fn template(tokenizer: &Tokenizer) -> Result<ChatTemplate> {
    tokenizer.chat_template_renderer().ok_or_else(|| {
        Error::Template(
            "this model has no chat template (a base model?); run without --chat".into(),
        )
    })?
}

/// A chat turn's token ids: `messages` in the template, then the assistant's turn opened.
pub fn chat_tokens(
    tokenizer: &Tokenizer,
    template: &ChatTemplate,
    messages: &[ChatMessage],
) -> Result<Vec<u32>> {
    let text = template.render(messages, true)?;
    tokenizer.encode(&text, false, true)
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
    let mode = if args.chat { Mode::Chat } else { Mode::Text };
    let opts = GenerateOptions {
        max_tokens: args.max_tokens,
        stop_at_eog: !args.ignore_eos,
        sampling: args.sampling.params(&l.recommended, mode),
        draft_max: args.speculative.draft_max,
        draft_adaptive: !args.speculative.draft_fixed,
        guard: args.speculative.guard(),
    };
    let mut spec = Speculator::new(&args.speculative, &l)?;
    let mut drafter = spec.drafter();
    let mut stdout = std::io::stdout();
    let streaming = !args.json;
    let g = pollster::block_on(generate_with(
        &mut l.session,
        drafter.as_mut(),
        &l.tokenizer,
        &tokens,
        &opts,
        |piece| {
            if streaming {
                let _ = stdout.write_all(piece.as_bytes());
                let _ = stdout.flush();
            }
            true
        },
    ))?;
    if args.json {
        let mut out = json!({
            "text": g.text,
            "tokens": g.tokens,
            "prompt_tokens": tokens,
            "prefill_tokens_per_second": g.prefill_tokens_per_second(),
            "decode_tokens_per_second": g.decode_tokens_per_second(),
            "dispatches_per_token": l.session.dispatches_per_token(),
            "dispatches_per_draft": l.session.dispatches_per_draft(),
            "stop": format!("{:?}", g.stop),
            "sampling": opts.sampling,
        });
        if let (Some(o), serde_json::Value::Object(s)) = (out.as_object_mut(), spec.json(&g)) {
            o.extend(s);
        }
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
        if let Some(s) = g.speculation {
            eprintln!("{}", spec.summary(&s));
        }
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
    let sampling = args.sampling.params(&l.recommended, Mode::Chat);
    let mut spec = Speculator::new(&args.speculative, &l)?;
    if !args.model.quiet {
        eprintln!("sampling: {}", crate::info::describe(&sampling));
    }
    eprintln!("Chat with the model; /reset starts over, /exit or Ctrl-D leaves.");
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    let mut turn = 0u64;
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
        let mut opts = GenerateOptions {
            max_tokens: args.max_tokens,
            stop_at_eog: true,
            sampling: sampling.clone(),
            draft_max: args.speculative.draft_max,
            draft_adaptive: !args.speculative.draft_fixed,
            guard: args.speculative.guard(),
        };
        // One random stream per turn, reproducible from --seed, never the same twice.
        opts.sampling.seed = sampling.seed.wrapping_add(turn);
        turn += 1;
        let mut drafter = spec.drafter();
        let g = pollster::block_on(generate_with(
            &mut l.session,
            drafter.as_mut(),
            &l.tokenizer,
            &tokens,
            &opts,
            |p| {
                let _ = stdout.write_all(p.as_bytes());
                let _ = stdout.flush();
                true
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
