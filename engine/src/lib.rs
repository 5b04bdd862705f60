//! Tandem: LLM inference whose WGSL kernels run unchanged natively (wgpu) and in the browser (WebGPU).
//!
//! Layers, bottom up: `gguf` reads model files, `quant` knows the block formats, `gpu` owns the
//! device and the kernel pipelines, `kernels` describes each WGSL kernel's bindings and dispatch,
//! `model` plans memory and records the forward pass, `tokenizer` turns text into tokens and
//! back, `sampling` picks tokens, `generate` runs the decode loop, `speculative` drafts and verifies; `platform` holds what differs between native and web.

pub mod bench;
pub mod error;
pub mod fuzz;
pub mod generate;
pub mod gguf;
pub mod gpu;
pub mod kernels;
pub mod model;
pub mod platform;
pub mod quant;
pub mod sampling;
pub mod speculative;
pub mod tokenizer;

pub use error::{Error, Result};
