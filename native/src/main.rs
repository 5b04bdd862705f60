//! `tandem`: run GGUF language models on the GPU from the command line.
//!
//! One file a command (run.rs holds `run` and `chat`; serve/ the server), the arguments they share in args.rs, and
//! opening a model in load.rs; main.rs only parses and dispatches.

mod args;
mod bench;
mod info;
mod load;
mod perplexity;
mod run;
mod serve;
mod speculate;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tandem",
    version,
    about = "Run GGUF language models on the GPU (wgpu: Vulkan, Metal, DX12)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate text from a prompt, streaming it to stdout.
    Run(run::RunArgs),
    /// Chat with the model in the terminal, using its chat template.
    Chat(run::ChatArgs),
    /// Serve the model over OpenAI's HTTP API (chat and text completions, streamed or not).
    Serve(serve::ServeArgs),
    /// Measure perplexity on a text file (llama-perplexity's method; -c is the chunk size).
    #[command(mut_arg("ctx", |a| a.help(format!("Tokens per chunk, as llama-perplexity's -c: the second half of each chunk is scored [default: {}]", perplexity::DEFAULT_CHUNK))))]
    Perplexity(perplexity::PerplexityArgs),
    /// Show what is in a GGUF file and whether this GPU can run it.
    Info(info::InfoArgs),
    /// Time prefill and decode over distinct prompts, and the kernels of one token.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Chat(args) => run::chat(args),
        Command::Serve(args) => serve::serve(args),
        Command::Perplexity(args) => perplexity::perplexity(args),
        Command::Info(args) => info::info(args),
        Command::Bench(args) => bench::bench(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = std::io::stdout().flush();
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
