//! `tandem-gen --preset qwen3-30b-a3b --out /data/qwen3-30b-a3b-synth.gguf`: writes a synthetic
//! GGUF (see the library docs). Generate it where it runs; never commit it.

use std::io::BufWriter;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;

#[derive(Parser)]
#[command(about = "Synthetic GGUF models with real shapes and random weights")]
struct Args {
    /// The model's shape.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(tandem_gen::PRESETS))]
    preset: String,
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Generator threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Layers instead of the preset's (the same shapes, smaller: for quick runs on slow adapters).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    layers: Option<u32>,
    /// Add a next-token-prediction (MTP) layer after the main ones (llama.cpp's nextn layout).
    #[arg(long)]
    mtp: bool,
}

fn main() {
    let a = Args::parse();
    let Some(mut shape) = tandem_gen::preset(&a.preset) else {
        eprintln!(
            "unknown preset {:?}; presets: {}",
            a.preset,
            tandem_gen::PRESETS.join(", ")
        );
        std::process::exit(2);
    };
    if let Some(n) = a.layers {
        shape.n_layer = n;
    }
    shape.mtp = a.mtp;
    let spec = tandem_gen::model_spec(&shape);
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(4, |n| n.get()));
    let total = spec.total_bytes();
    eprintln!(
        "{}: {} tensors, {:.2} GB of tensor data, {threads} threads -> {}",
        shape.name,
        spec.tensors.len(),
        total as f64 / 1e9,
        a.out.display()
    );
    let file = std::fs::File::create(&a.out).unwrap_or_else(|e| {
        eprintln!("{}: {e}", a.out.display());
        std::process::exit(1);
    });
    let t0 = Instant::now();
    let mut last = 0u64;
    let mut w = BufWriter::with_capacity(1 << 22, file);
    let res = tandem_gen::write_gguf(&spec, &mut w, a.seed, threads, &mut |done, total| {
        if done - last >= 1 << 30 || done == total {
            last = done;
            eprintln!(
                "  {:.1}/{:.1} GB, {:.2} GB/s",
                done as f64 / 1e9,
                total as f64 / 1e9,
                done as f64 / 1e9 / t0.elapsed().as_secs_f64()
            );
        }
    });
    if let Err(e) = res {
        eprintln!("writing {}: {e}", a.out.display());
        std::process::exit(1);
    }
    eprintln!("done in {:.1} s", t0.elapsed().as_secs_f64());
}
