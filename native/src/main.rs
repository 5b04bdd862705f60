//! `tandem`: run GGUF language models on the GPU from the command line.

mod bench;
mod cli;
mod load;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => cli::run(args),
        Command::Chat(args) => cli::chat(args),
        Command::Perplexity(args) => cli::perplexity(args),
        Command::Info(args) => cli::info(args),
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
