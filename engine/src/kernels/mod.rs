//! The Rust side of each WGSL kernel: its bindings, its parameters, and the grid it is launched
//! with. A builder returns a [`Dispatch`]: pipeline(s), a bind group made once, and a grid rule
//! evaluated per pass from the [`StepInfo`], so a forward pass is a fixed list of dispatches
//! replayed with one small uniform update.
//!
//! - [`dispatch`]: the machinery ([`StepInfo`], [`Dispatch`], [`Rows`], [`When`], grids, keys);
//! - [`shape`]: the matvec shape policy ([`MatvecShape`], rows per workgroup, subgroup variants);
//! - one file per WGSL family, each with its binding layout, `Params` and builder(s): [`mat`]
//!   (matvec, matmul, matvec_glu), [`glu`], [`embed`], [`norm`], [`rope`], [`attention`],
//!   [`argmax`], [`sample`] and [`moe`];
//! - [`stream`]: the streaming-read ceiling every kernel's bandwidth is put against.

pub mod argmax;
pub mod attention;
pub mod dispatch;
pub mod embed;
pub mod ffn_in;
pub mod glu;
pub mod mat;
pub mod matvec_pair;
pub mod moe;
pub mod norm;
pub mod rope;
pub mod route_share;
pub mod sample;
pub mod shape;
pub mod stream;

#[cfg(test)]
pub(crate) mod reference;
#[cfg(test)]
pub(crate) mod tests;

pub use argmax::{argmax, argmax_partial_len};
pub use attention::{
    attention, attention_partial_len, attention_splits, AttnOpts, DecodeRope, ATTN_MIN_WORKGROUPS,
    ATTN_TILE, MAX_ATTN_SPLITS, MAX_SPLIT_TOKENS,
};
pub use dispatch::{Cost, CostRule, Dispatch, Grid, Row, Rows, Seqs, StepInfo, StepUniform, When};
pub use embed::embed;
pub use ffn_in::{glu_small, glu_small_with, matvec_glu, matvec_glu_with, takes_glu_small};
pub use glu::{glu, Activation};
pub use mat::{
    mat, q8_bytes, quantize_q8, small_q8_pays, small_q8_reads, takes_small_q8, GpuWeight, MatOpts,
    Q8From, WeightChunk,
};
pub use norm::{rmsnorm, NormOpts};
pub use rope::{rope_store, Heads, KvBuffers, KvType, RopeConfig};
pub use route_share::{matvec_route, route_share_fits, route_slot_words, RouteShare};
pub use sample::{sample, SampleKernels};
pub use shape::{decode_unit, matvec_rows, subgroups_fit, MatvecShape};
pub use stream::{stream_read, stream_read_bandwidth};

#[cfg(test)]
pub(crate) use dispatch::KernelBinds;
pub(crate) use dispatch::{f32s, grid_2d, key, qtype_suffix, IN2_OUT_LAYOUT, IN_OUT_LAYOUT};

/// What every kernel binds, family by family, as the Rust side binds it: every variant in
/// `gpu::shaders::SHADERS` must have its kernel here (`tests/bindings.rs` checks them against
/// the WGSL).
#[cfg(test)]
pub(crate) const BINDS: &[&[KernelBinds]] = &[
    mat::BINDS,
    matvec_pair::BINDS,
    route_share::BINDS,
    ffn_in::BINDS,
    glu::BINDS,
    embed::BINDS,
    norm::BINDS,
    rope::BINDS,
    attention::BINDS,
    argmax::BINDS,
    sample::BINDS,
    moe::ROUTING_BINDS,
    moe::BINDS,
    stream::BINDS,
];
