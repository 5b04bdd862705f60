//! The Tandem engine in the browser: a small wasm-bindgen API over `tandem-engine`, used by the npm
//! package's worker (web/npm/src/worker.ts) and, through it, by the chat page.
//!
//! Weights arrive as a `ReadableStreamDefaultReader` of the GGUF file (a fetch body, a `Blob`'s
//! stream, a Cache API response): the header is parsed from the first bytes, the model is checked
//! against the adapter before the rest flows, then each tensor is uploaded as its bytes arrive
//! (`tandem_engine::model::FileOrderStream`). The wasm heap holds about one layer, never the model.
//!
//! Errors reach JavaScript as `Error` objects with a `code` ([`contract::ErrorCode`]); what the
//! package and the engine agree on (codes, chat options, defaults and result, the cache name) is
//! written once in [`contract`], from which the package's `contract.ts` is generated.

pub mod contract;

#[cfg(target_arch = "wasm32")]
mod bindings;
