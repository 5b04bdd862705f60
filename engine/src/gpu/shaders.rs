//! Every WGSL kernel variant, expanded from `wgsl/` at build time (see `engine/build.rs`).

include!(concat!(env!("OUT_DIR"), "/shaders.rs"));

/// The source of one variant, e.g. `source("matvec_q4_k")`.
pub fn source(name: &str) -> Option<&'static str> {
    SHADERS.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}
