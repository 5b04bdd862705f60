//! The one error type of the engine. Each variant says what went wrong and, where it can, what to do.

use thiserror::Error;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Error)]
pub enum Error {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("not a GGUF file: the magic is {found:?}, expected \"GGUF\"")]
    BadMagic { found: [u8; 4] },
    #[error("unsupported GGUF version {0}: Tandem reads versions 2 and 3")]
    UnsupportedVersion(u32),
    #[error("the GGUF file is truncated or corrupt: {what} needs {len} bytes at offset {offset}, but the file has {file_len}")]
    Truncated {
        what: String,
        offset: u64,
        len: u64,
        file_len: u64,
    },
    #[error("the GGUF file is corrupt: {0}")]
    Corrupt(String),
    #[error("tensor {name} has type {ty}, which Tandem does not support; re-quantize the model to one of {}", crate::quant::gpu_type_names())]
    UnsupportedTensorType { name: String, ty: String },
    #[error("the model's metadata lacks {key}; it is needed for architecture {arch}")]
    MissingMetadata { key: String, arch: String },
    #[error("metadata {key} has the wrong type: expected {expected}")]
    MetadataType { key: String, expected: &'static str },
    #[error("tensor {0} is missing from the model")]
    MissingTensor(String),
    #[error("tensor {name} has shape {found:?}, expected {expected:?}")]
    TensorShape {
        name: String,
        found: Vec<u64>,
        expected: Vec<u64>,
    },
    #[error("unsupported model architecture {0:?}; Tandem runs llama, qwen2, qwen3, gemma3, qwen3moe and glm4moe")]
    UnsupportedArchitecture(String),
    #[error("no GPU adapter found: {0}. Install a Vulkan, Metal or DX12 driver (or Mesa's lavapipe for a software GPU)")]
    NoAdapter(String),
    #[error("the GPU cannot give {what}: the model needs {need}, the adapter has {have}. Use a smaller model or a smaller quantization of it, a shorter context, or a GPU with more memory")]
    Limits { what: String, need: u64, have: u64 },
    #[error("GPU error: {0}")]
    Gpu(String),
    #[error("the GPU device was lost ({0}); load the model again to go on")]
    DeviceLost(String),
    #[error("kernel {kernel} failed to compile: {message}")]
    Shader { kernel: String, message: String },
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("chat template: {0}")]
    Template(String),
    #[error("the prompt has {tokens} tokens but the context holds {context}; shorten the prompt or raise the context size")]
    ContextOverflow { tokens: usize, context: usize },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl Error {
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
