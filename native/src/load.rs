//! Opening a model: the file, the GPU, the weights (with a progress bar) and a session.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use tandem_engine::gguf::{Gguf, MmapSource};
use tandem_engine::gpu::{Gpu, GpuOptions};
use tandem_engine::model::{Config, Model, Session, SessionOptions, SessionSet};
use tandem_engine::tokenizer::Tokenizer;
use tandem_engine::{Error, Result};

use tandem_engine::sampling::Sampling;

use crate::args::ModelArgs;

pub struct Loaded {
    pub tokenizer: Tokenizer,
    pub session: Session,
    /// The sampling the model's GGUF recommends.
    pub recommended: Sampling,
}

/// The model path: the one given, or the default model in the cache.
pub fn model_path(given: &Option<PathBuf>) -> Result<PathBuf> {
    if let Some(p) = given {
        return Ok(p.clone());
    }
    let p = tandem_engine::platform::model_dir().join(tandem_engine::platform::DEFAULT_MODEL);
    if !p.exists() {
        return Err(Error::InvalidArgument(format!(
            "no --model given and the default model is not in the cache ({}); run scripts/fetch-models.sh",
            p.display()
        )));
    }
    Ok(p)
}

pub fn open_gguf(path: &Path) -> Result<(MmapSource, Gguf)> {
    let src = MmapSource::open(path)?;
    let gguf = Gguf::parse(&src)?;
    Ok((src, gguf))
}

pub fn gpu(args: &ModelArgs) -> Result<Arc<Gpu>> {
    let opts = GpuOptions {
        force_fallback: args.software,
        portable_only: args.portable,
    };
    let gpu = pollster::block_on(Gpu::new(&opts))?;
    if !args.quiet {
        eprintln!("GPU: {}", gpu.describe());
    }
    Ok(Arc::new(gpu))
}

/// A model on the GPU, before any session: what `serve` shares between its slots.
pub struct LoadedModel {
    pub path: PathBuf,
    pub model: Arc<Model>,
    pub tokenizer: Tokenizer,
    /// The sampling the model's GGUF recommends.
    pub recommended: Sampling,
}

pub fn load(args: &ModelArgs) -> Result<Loaded> {
    let m = load_model(args, 1)?;
    let session = session(&m.model, args)?;
    Ok(Loaded {
        tokenizer: m.tokenizer,
        session,
        recommended: m.recommended,
    })
}

/// Opens the model file and uploads its weights, with a progress bar; `slots`: the sessions whose
/// KV caches will share one buffer per layer (`serve --parallel`).
pub fn load_model(args: &ModelArgs, slots: u32) -> Result<LoadedModel> {
    let path = model_path(&args.model)?;
    let (src, gguf) = open_gguf(&path)?;
    let tokenizer = Tokenizer::from_gguf(&gguf)?;
    let recommended = Sampling::from_gguf(&gguf);
    let gpu = gpu(args)?;
    // Refused here, before the upload, if the adapter cannot hold the sessions `args` ask for.
    let config = Model::check(&gpu, &gguf)?;
    session_options(&config, args).check_set(&gpu, &config, slots)?;
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(0)
    };
    bar.set_style(
        ProgressStyle::with_template("loading {msg} [{bar:30}] {bytes}/{total_bytes}")
            .expect("progress template")
            .progress_chars("=> "),
    );
    bar.set_message(
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    let model = pollster::block_on(Model::load(gpu, &gguf, &src, &mut |p| {
        bar.set_length(p.total);
        bar.set_position(p.done);
    }))?;
    bar.finish_and_clear();
    Ok(LoadedModel {
        path,
        model: Arc::new(model),
        tokenizer,
        recommended,
    })
}

/// The sessions `args` ask for on the model of `config`: the context `-c`, else the model's, at
/// most 4096.
pub fn session_options(config: &Config, args: &ModelArgs) -> SessionOptions {
    SessionOptions {
        ctx: args.ctx.unwrap_or(config.ctx_train.min(4096)),
        ubatch: args.ubatch,
        outputs: args.outputs,
        kv: args.kv_type.into(),
    }
}

/// `n` sessions on `model` as `args` shape them, whose decode steps run as one batched pass.
pub fn session_set(model: &Arc<Model>, args: &ModelArgs, n: u32) -> Result<SessionSet> {
    let opts = session_options(&model.config, args);
    pollster::block_on(SessionSet::new(model.clone(), opts, n))
}

/// A session (KV cache and activations) on `model`, as `args` shape it.
pub fn session(model: &Arc<Model>, args: &ModelArgs) -> Result<Session> {
    let opts = session_options(&model.config, args);
    pollster::block_on(Session::new(model.clone(), opts))
}
