//! Tandem: LLM inference whose WGSL kernels run unchanged natively (wgpu) and in the browser (WebGPU).
//!
//! Layers, bottom up: `gguf` reads model files, `quant` knows the block formats, `gpu` owns the
//! device and the kernel pipelines, `kernels` describes each WGSL kernel's bindings and dispatch,
//! `model` plans memory and records the forward pass, `tokenizer` and `sampling` turn text into
//! tokens and logits into tokens.

pub mod error;
pub mod gguf;
pub mod quant;
pub mod tokenizer;

pub use error::{Error, Result};
pub mod gpu;
pub mod kernels;
pub mod model;
pub mod platform;
