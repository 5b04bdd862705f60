//! `tandem info`: what is in a GGUF file and whether this adapter can run it.

use std::collections::BTreeMap;

use clap::Args;
use tandem_engine::model::{Config, Model};
use tandem_engine::sampling::{Mode, SamplerParams, Sampling};
use tandem_engine::Result;

use crate::args::ModelArgs;
use crate::load;

#[derive(Args)]
pub struct InfoArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Also list every tensor
    #[arg(long)]
    pub tensors: bool,
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
    let recommended = Sampling::from_gguf(&g);
    if recommended.is_empty() {
        println!("recommended sampling: none in the file");
    }
    for (what, mode) in [("run", Mode::Text), ("chat", Mode::Chat)] {
        let p = recommended.clone().over(SamplerParams::defaults(mode));
        println!("sampling ({what}): {}", describe(&p));
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
        let opts = load::session_options(&c, &args.model);
        let kv = 2
            * (c.n_layer + c.n_nextn) as u64
            * (c.n_kv_head * c.head_dim) as u64
            * opts.ctx as u64
            * opts.kv.bytes();
        println!("adapter: {}", gpu.describe());
        println!(
            "GPU memory needed: {:.1} MB of weights + {:.1} MB of KV cache at context {}",
            weights as f64 / 1e6,
            kv as f64 / 1e6,
            opts.ctx
        );
        // The checks `run`, `chat` and `serve` make before they upload anything.
        let fits = Model::check(&gpu, &g).and_then(|c| opts.check(&gpu, &c));
        match (unsupported.is_empty(), fits) {
            (true, Ok(())) => println!("this adapter can run it: yes"),
            (false, _) => println!(
                "this adapter can run it: no, unsupported tensor types: {}",
                unsupported.join(", ")
            ),
            (true, Err(e)) => println!("this adapter can run it: no: {e}"),
        }
    }
    Ok(())
}

/// Sampler settings in one line, with the CLI's flag names.
pub fn describe(p: &SamplerParams) -> String {
    format!(
        "temperature {}, top-k {}, top-p {}, min-p {}, repeat-penalty {} over {}",
        p.temperature, p.top_k, p.top_p, p.min_p, p.repeat_penalty, p.repeat_last_n
    )
}
