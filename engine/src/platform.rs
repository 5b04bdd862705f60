//! What differs between the native build and the browser build, kept in one place.

/// The local model cache: `$TANDEM_MODEL_DIR`, else `~/.cache/tandem/models`
/// (`scripts/fetch-models.sh` fills it).
#[cfg(not(target_arch = "wasm32"))]
pub fn model_dir() -> std::path::PathBuf {
    if let Some(dir) = std::env::var_os("TANDEM_MODEL_DIR") {
        return dir.into();
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
    std::path::Path::new(&home).join(".cache/tandem/models")
}

/// The default model's file name in the cache.
pub const DEFAULT_MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Seconds on a monotonic clock, for speed figures.
#[cfg(not(target_arch = "wasm32"))]
pub fn now_seconds() -> f64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}
