//! Every WGSL kernel variant, expanded from `wgsl/` at build time (see `engine/build.rs`).

include!(concat!(env!("OUT_DIR"), "/shaders.rs"));

/// The source of one variant, e.g. `source("matvec_q4_k")`, as written in WGSL: the `_sg`
/// variants open with [`ENABLE_SUBGROUPS`].
pub fn source(name: &str) -> Option<&'static str> {
    SHADERS.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

/// The source of one variant as the shader compiler behind `backend` takes it. The browser's
/// (Tint, WebKit) needs `enable subgroups;` before a kernel uses subgroup built-ins; naga 30,
/// which compiles WGSL for wgpu's native backends, knows the directive but rejects it as not yet
/// implemented (gfx-rs/wgpu#5555) and takes the built-ins without it (its validator checks the
/// device's subgroup capability instead), so there the directive line is skipped.
pub fn source_for(name: &str, backend: wgpu::Backend) -> Option<&'static str> {
    let s = source(name)?;
    Some(match backend {
        wgpu::Backend::BrowserWebGpu => s,
        _ => s.strip_prefix(ENABLE_SUBGROUPS).unwrap_or(s),
    })
}
