//! Models: hyperparameters, weights on the GPU, and sessions that run the forward pass.
//!
//! A [`Session`] plans its memory once (activations for a batch of up to `ubatch` tokens, the KV
//! cache for `ctx` positions) and records the forward pass once as a list of dispatches. Each pass
//! (a prompt chunk in prefill, one token in decode, the n+1 tokens of a speculative verification)
//! replays that list with a new `StepInfo` in one compute pass and one submit (an MTP round's
//! verification in two, so that the GPU starts while the rest is recorded). A [`SessionSet`]
//! is several sessions over one KV buffer per layer, whose decode steps run as one batched pass.

mod batch;
mod config;
mod mtp;
mod perplexity;
mod plan;
mod profile;
mod recipe;
mod session;
mod source;
mod weights;

use std::sync::Arc;

pub use crate::kernels::KvType;
pub use batch::SessionSet;
pub use config::MoeConfig;
pub use config::{Arch, Config, SlidingWindow};
pub use perplexity::{perplexity, scored_rows, Perplexity};
pub use plan::SessionOptions;
pub use profile::KernelTime;
pub use session::Session;
pub use source::{read_header, ChunkReader, FileOrderStream, SliceTensors, TensorBytes};
pub use weights::{DenseFfn, Ffn, Layer, LoadProgress, MoeFfn, MtpLayer, Weights};

use crate::gguf::{ByteSource, Gguf};
use crate::gpu::Gpu;
use crate::{Error, Result};

pub struct Model {
    pub gpu: Arc<Gpu>,
    pub config: Config,
    pub weights: Weights,
}

impl Model {
    /// Uploads the model's weights from a random-access source (a memory-mapped file, a buffer);
    /// `progress` hears of every tensor.
    pub async fn load(
        gpu: Arc<Gpu>,
        g: &Gguf,
        src: &dyn ByteSource,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Model> {
        Model::load_from(gpu, g, &mut SliceTensors(src), progress).await
    }

    /// Uploads the model's weights from any [`TensorBytes`] source: a file, a `Blob`, or a download
    /// arriving in file order ([`FileOrderStream`]), each tensor uploaded as its bytes arrive.
    pub async fn load_from<'s, S: TensorBytes<'s>>(
        gpu: Arc<Gpu>,
        g: &Gguf,
        src: &mut S,
        progress: &mut dyn FnMut(LoadProgress),
    ) -> Result<Model> {
        let config = Model::check(&gpu, g)?;
        let weights = gpu
            .scoped_async(
                "uploading the weights",
                Weights::load(&gpu, g, src, &config, progress),
            )
            .await?;
        Ok(Model {
            gpu,
            config,
            weights,
        })
    }
}

impl Model {
    /// Whether `gpu` can run the model described by the header `g`, before any tensor data is
    /// read (in a browser: before gigabytes are downloaded). Checks the architecture, every
    /// tensor's type, and that one row of every matrix fits a storage binding; returns the config.
    pub fn check(gpu: &Gpu, g: &Gguf) -> Result<Config> {
        let config = Config::from_gguf(g)?;
        for t in &g.tensors {
            if !t.ty.gpu_supported() {
                return Err(Error::UnsupportedTensorType {
                    name: t.name.clone(),
                    ty: t.ty.name(),
                });
            }
            if t.dims.len() >= 2 {
                let row = crate::quant::gpu_bytes(t.ty, t.dims[0]).unwrap_or(t.n_bytes);
                if row > gpu.max_binding() {
                    return Err(Error::Limits {
                        what: format!("a storage binding for one row of {}", t.name),
                        need: row,
                        have: gpu.max_binding(),
                    });
                }
            }
        }
        Ok(config)
    }

    /// Bytes of tensor data the model uploads (saturating: a hostile header's claims are only
    /// checked against the file later).
    pub fn weight_bytes(g: &Gguf) -> u64 {
        g.tensors
            .iter()
            .fold(0u64, |sum, t| sum.saturating_add(t.n_bytes))
    }
}
