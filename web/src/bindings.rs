//! The wasm-bindgen API (see lib.rs): `Engine` and `version()`.

use std::cell::{Cell, RefCell, RefMut};
use std::rc::Rc;
use std::sync::Arc;

use js_sys::{Function, Promise, Reflect, Uint8Array};
use serde::{Deserialize, Serialize};
use tandem_engine::bench::BenchOptions;
use tandem_engine::generate::{generate_with, GenerateOptions, StopReason};
use tandem_engine::gpu::{Gpu, GpuOptions};
use tandem_engine::model::{
    read_header, ChunkReader, FileOrderStream, Model, Session, SessionOptions,
};
use tandem_engine::sampling::{SamplerParams, Sampling};
use tandem_engine::speculative::{Drafter, GuardOptions};
use tandem_engine::tokenizer::{ChatMessage, ChatTemplate, Tokenizer};
use tandem_engine::Error;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{future_to_promise, JsFuture};

use crate::contract::{
    ChatDefaults, ChatOptions, ChatResult, ErrorCode, FinishReason, Speculative,
};

fn js_error(code: ErrorCode, message: &str) -> JsValue {
    let e = js_sys::Error::new(message);
    let _ = Reflect::set(&e, &"code".into(), &code.as_str().into());
    e.into()
}

fn engine_error(e: Error) -> JsValue {
    js_error(ErrorCode::of(&e), &e.to_string())
}

fn to_js<T: Serialize>(v: &T) -> JsValue {
    let text = serde_json::to_string(v).unwrap_or_else(|_| "null".into());
    js_sys::JSON::parse(&text).unwrap_or(JsValue::NULL)
}

fn from_js<T: for<'de> Deserialize<'de>>(v: &JsValue, what: &str) -> Result<T, JsValue> {
    let text: String = js_sys::JSON::stringify(v)
        .map(Into::into)
        .unwrap_or_else(|_| "null".into());
    serde_json::from_str(&text)
        .map_err(|e| js_error(ErrorCode::InvalidArgument, &format!("{what}: {e}")))
}

/// A `ReadableStreamDefaultReader` of bytes, as the engine's [`ChunkReader`].
struct JsReader(JsValue);

impl ChunkReader for JsReader {
    async fn next_chunk(&mut self) -> tandem_engine::Result<Option<Vec<u8>>> {
        let read: Function = Reflect::get(&self.0, &"read".into())
            .ok()
            .and_then(|f| f.dyn_into().ok())
            .ok_or_else(|| Error::InvalidArgument("not a stream reader".into()))?;
        let promise: Promise = read
            .call0(&self.0)
            .and_then(|p| p.dyn_into())
            .map_err(|e| Error::Io {
                path: "the model stream".into(),
                source: std::io::Error::other(format!("{e:?}")),
            })?;
        let r = JsFuture::from(promise).await.map_err(|e| Error::Io {
            path: "the model stream".into(),
            source: std::io::Error::other(
                js_sys::JSON::stringify(&e)
                    .map(String::from)
                    .unwrap_or_else(|_| format!("{e:?}")),
            ),
        })?;
        let done = Reflect::get(&r, &"done".into())
            .ok()
            .and_then(|d| d.as_bool())
            .unwrap_or(true);
        if done {
            return Ok(None);
        }
        let value = Reflect::get(&r, &"value".into()).unwrap_or(JsValue::UNDEFINED);
        Ok(Some(Uint8Array::new(&value).to_vec()))
    }
}

struct Loaded {
    name: String,
    /// The sampling the model's GGUF recommends.
    recommended: Sampling,
    tokenizer: Tokenizer,
    template: Option<ChatTemplate>,
    session: Session,
}

struct Inner {
    gpu: Arc<Gpu>,
    model: Option<Loaded>,
}

/// The engine: one GPU device, at most one model.
#[wasm_bindgen]
pub struct Engine {
    gpu: Arc<Gpu>,
    inner: Rc<RefCell<Inner>>,
    stop: Rc<Cell<bool>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CreateOptions {
    /// Only the kernels without f16 and subgroups.
    portable: bool,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct LoadOptions {
    name: String,
    /// KV-cache positions (default: the model's training context, at most 2048).
    context: Option<u32>,
}

#[derive(Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
struct BenchRequest {
    prompts: usize,
    prompt_tokens: usize,
    gen_tokens: usize,
    profile: bool,
    profile_tokens: u32,
    pass_tokens: Vec<u32>,
    /// Prompts as text (raw, BOS where the model asks for it) in place of the pseudo-random ones.
    prompt_texts: Vec<String>,
    /// Default: MTP where the model has an MTP layer, as for chat.
    speculative: Option<Speculative>,
    draft_max: usize,
    /// Speculate on every step even where plain decode steps measure faster (to time
    /// speculation itself).
    always_speculate: bool,
}

impl Default for BenchRequest {
    fn default() -> Self {
        BenchRequest {
            prompts: 20,
            prompt_tokens: 512,
            gen_tokens: 128,
            profile: false,
            profile_tokens: 1,
            pass_tokens: Vec::new(),
            prompt_texts: Vec::new(),
            speculative: None,
            draft_max: GenerateOptions::default().draft_max,
            always_speculate: false,
        }
    }
}

#[derive(Deserialize)]
struct JsMessage {
    role: String,
    content: String,
}

#[wasm_bindgen]
impl Engine {
    /// Opens the adapter and the device (`options`: `{ portable?: boolean }`).
    pub fn create(options: JsValue) -> Promise {
        future_to_promise(async move {
            let opts: CreateOptions = if options.is_undefined() || options.is_null() {
                CreateOptions::default()
            } else {
                from_js(&options, "engine options")?
            };
            let has_gpu = Reflect::get(&js_sys::global(), &"navigator".into())
                .ok()
                .filter(|n| n.is_object())
                .and_then(|n| Reflect::get(&n, &"gpu".into()).ok())
                .is_some_and(|g| g.is_object());
            if !has_gpu {
                return Err(js_error(
                    ErrorCode::NoWebgpu,
                    "this browser has no WebGPU (navigator.gpu is missing): use a recent Chrome, Edge or Safari, or Firefox with WebGPU enabled",
                ));
            }
            let gpu = Gpu::new(&GpuOptions {
                force_fallback: false,
                portable_only: opts.portable,
            })
            .await
            .map_err(engine_error)?;
            // The engine shares the GPU and the model as `Arc`s (natively, across threads); here
            // there is one thread and they are not `Send`.
            #[allow(clippy::arc_with_non_send_sync)]
            let gpu = Arc::new(gpu);
            Ok(Engine {
                gpu: gpu.clone(),
                inner: Rc::new(RefCell::new(Inner { gpu, model: None })),
                stop: Rc::new(Cell::new(false)),
            }
            .into())
        })
    }

    /// The adapter and the features in use.
    pub fn info(&self) -> JsValue {
        let g = &self.gpu;
        to_js(&serde_json::json!({
            "adapter": g.info.name,
            "vendor": g.info.vendor,
            "backend": format!("{:?}", g.info.backend),
            "deviceType": format!("{:?}", g.info.device_type),
            "description": g.describe(),
            "features": { "f16": g.features.f16, "subgroups": g.features.subgroups, "timestamps": g.features.timestamps, "int8Dot": g.features.int8_dot },
            "limits": {
                "maxStorageBufferBindingSize": g.limits.max_storage_buffer_binding_size,
                "maxBufferSize": g.limits.max_buffer_size,
                "maxStorageBuffersPerShaderStage": g.limits.max_storage_buffers_per_shader_stage,
                "maxComputeInvocationsPerWorkgroup": g.limits.max_compute_invocations_per_workgroup,
            },
            "model": self.inner.try_borrow().ok().and_then(|i| i.model.as_ref().map(|m| m.name.clone())),
            "wasmMemoryBytes": wasm_memory_bytes(),
        }))
    }

    /// Loads a model from a byte stream reader of its GGUF file of `file_len` bytes. `on_progress`
    /// gets `{ phase: "header" | "tensors" | "pipelines" | "ready", ... }`. The reader is read
    /// to the end of the tensor data; on an error (bad header, model too large for the adapter) it
    /// is left where it stopped, and the caller cancels it.
    pub fn load(
        &self,
        reader: JsValue,
        file_len: f64,
        options: JsValue,
        on_progress: Function,
    ) -> Promise {
        let inner = self.inner.clone();
        future_to_promise(async move {
            let opts: LoadOptions = if options.is_undefined() || options.is_null() {
                LoadOptions::default()
            } else {
                from_js(&options, "load options")?
            };
            let gpu = {
                let mut i = inner
                    .try_borrow_mut()
                    .map_err(|_| js_error(ErrorCode::Busy, "the engine is busy"))?;
                // Unload first: the old model's buffers go before the new one's arrive.
                i.model = None;
                i.gpu.clone()
            };
            let report = |v: serde_json::Value| {
                let _ = on_progress.call1(&JsValue::NULL, &to_js(&v));
            };
            let t0 = tandem_engine::platform::now_seconds();
            let file_len = if file_len > 0.0 {
                file_len as u64
            } else {
                u64::MAX >> 1
            };
            let mut reader = JsReader(reader);
            let (g, prefix) = read_header(&mut reader, file_len)
                .await
                .map_err(engine_error)?;
            let config = Model::check(&gpu, &g).map_err(engine_error)?;
            // A context too long for the adapter is refused before the download.
            let session_opts = SessionOptions {
                ctx: opts.context.unwrap_or(config.ctx_train.min(2048)).max(16),
                ..Default::default()
            };
            session_opts.check(&gpu, &config).map_err(engine_error)?;
            let tokenizer = Tokenizer::from_gguf(&g).map_err(engine_error)?;
            let template = match tokenizer.chat_template_renderer() {
                Some(Ok(t)) => Some(t),
                Some(Err(e)) => return Err(engine_error(e)),
                None => None,
            };
            let recommended = Sampling::from_gguf(&g);
            let total = Model::weight_bytes(&g);
            report(serde_json::json!({
                "phase": "header",
                "architecture": format!("{:?}", config.arch),
                "layers": config.n_layer,
                "embedding": config.n_embd,
                "vocabulary": config.n_vocab,
                "tensors": g.tensors.len(),
                "weightBytes": total,
                "fileBytes": file_len,
                "chatTemplate": template.is_some(),
            }));
            let mut stream = FileOrderStream::new(reader, prefix, file_len);
            let model = Model::load_from(gpu.clone(), &g, &mut stream, &mut |p| {
                report(serde_json::json!({
                    "phase": "tensors",
                    "bytes": p.received.unwrap_or(p.done),
                    "totalBytes": file_len,
                    "tensorBytes": p.done,
                    "totalTensorBytes": p.total,
                    "tensors": p.tensors_done,
                    "totalTensors": p.tensors_total,
                }));
            })
            .await
            .map_err(engine_error)?;
            let t1 = tandem_engine::platform::now_seconds();
            let before = gpu.pipeline_count();
            report(serde_json::json!({ "phase": "pipelines", "pipelines": before }));
            let ctx = session_opts.ctx;
            #[allow(clippy::arc_with_non_send_sync)]
            let session = Session::new(Arc::new(model), session_opts)
                .await
                .map_err(engine_error)?;
            let pipelines = gpu.pipeline_count();
            let t2 = tandem_engine::platform::now_seconds();
            let summary = serde_json::json!({
                "phase": "ready",
                "name": opts.name,
                "architecture": format!("{:?}", session.model.config.arch),
                "context": ctx,
                "pipelines": pipelines,
                "dispatchesPerToken": session.dispatches_per_token(),
                "mtp": session.has_mtp(),
                "chatTemplate": template.is_some(),
                "weightBytes": total,
                "uploadSeconds": t1 - t0,
                "pipelineSeconds": t2 - t1,
                "loadSeconds": t2 - t0,
                "wasmMemoryBytes": wasm_memory_bytes(),
                "chatDefaults": ChatDefaults::for_model(&recommended),
            });
            report(summary.clone());
            inner
                .try_borrow_mut()
                .map_err(|_| js_error(ErrorCode::Busy, "the engine is busy"))?
                .model = Some(Loaded {
                name: opts.name,
                recommended,
                tokenizer,
                template,
                session,
            });
            Ok(to_js(&summary))
        })
    }

    /// One chat turn: `messages` `[{ role, content }]` rendered with the model's chat template,
    /// with [`ChatOptions`] (each one left out from the model's [`ChatDefaults`]), the answer
    /// streamed to `on_text(piece)` (return `false` from it to stop). Resolves to a
    /// [`ChatResult`].
    pub fn chat(&self, messages: JsValue, options: JsValue, on_text: Function) -> Promise {
        let (inner, stop) = (self.inner.clone(), self.stop.clone());
        future_to_promise(async move {
            let messages: Vec<JsMessage> = from_js(&messages, "messages")?;
            turn(&inner, &stop, &options, &on_text, |m| {
                let template = m.template.as_ref().ok_or_else(|| {
                    js_error(
                        ErrorCode::TemplateError,
                        "this model has no chat template (a base model?): use a completion",
                    )
                })?;
                let messages: Vec<ChatMessage> = messages
                    .into_iter()
                    .map(|m| ChatMessage::new(m.role, m.content))
                    .collect();
                let text = template.render(&messages, true).map_err(engine_error)?;
                m.tokenizer.encode(&text, false, true).map_err(engine_error)
            })
            .await
        })
    }

    /// One completion: `prompt` continued as plain text (a base model's use; BOS added where
    /// the model wants one), otherwise as [`Engine::chat`].
    pub fn complete(&self, prompt: String, options: JsValue, on_text: Function) -> Promise {
        let (inner, stop) = (self.inner.clone(), self.stop.clone());
        future_to_promise(async move {
            turn(&inner, &stop, &options, &on_text, |m| {
                m.tokenizer
                    .encode(&prompt, true, false)
                    .map_err(engine_error)
            })
            .await
        })
    }

    /// `tandem bench`'s protocol on the loaded model ([`tandem_engine::bench`]): `options`
    /// `{ prompts?, promptTokens?, genTokens?, profile?, profileTokens?, passTokens?,
    /// promptTexts?, speculative?, draftMax? }` (defaults 20, 512, 128, false, 1, none, none, MTP
    /// where the model has it, 4, as the CLI's); resolves to the object `tandem bench --json`
    /// prints. The model's context must hold the longest prompt, `genTokens` and `profileTokens`.
    pub fn bench(&self, options: JsValue) -> Promise {
        let inner = self.inner.clone();
        // The borrow held across the awaits is the engine's one-request-at-a-time lock: a call
        // meanwhile fails `loaded`'s `try_borrow_mut` with `Busy`.
        #[allow(clippy::await_holding_refcell_ref)]
        future_to_promise(async move {
            let o: BenchRequest = if options.is_undefined() || options.is_null() {
                BenchRequest::default()
            } else {
                from_js(&options, "bench options")?
            };
            let mut m = loaded(&inner)?;
            let m = &mut *m;
            let prompt_ids = o
                .prompt_texts
                .iter()
                .map(|t| m.tokenizer.encode(t, true, false))
                .collect::<tandem_engine::Result<Vec<_>>>()
                .map_err(engine_error)?;
            let opts = BenchOptions {
                prompts: o.prompts,
                prompt_tokens: o.prompt_tokens,
                prompt_ids,
                gen_tokens: o.gen_tokens,
                profile: o.profile,
                profile_tokens: o.profile_tokens,
                pass_tokens: o.pass_tokens,
                draft_max: o.draft_max.max(1),
                draft_adaptive: true,
                guard: (!o.always_speculate).then(GuardOptions::default),
            };
            let mut mtp = Drafter::Mtp;
            let drafter = uses_mtp(&m.session, o.speculative)?.then_some(&mut mtp);
            let r = tandem_engine::bench::run(&mut m.session, drafter, &opts, |_, _, _| {})
                .await
                .map_err(engine_error)?;
            // The cache holds the bench's tokens, not a conversation: the next chat starts empty.
            m.session.truncate(0);
            Ok(to_js(&r))
        })
    }

    /// Stops the running chat turn after the current token.
    pub fn stop(&self) {
        self.stop.set(true);
    }

    /// Drops the model and its GPU buffers (the device stays).
    pub fn unload(&self) -> Result<(), JsValue> {
        self.inner
            .try_borrow_mut()
            .map_err(|_| js_error(ErrorCode::Busy, "the engine is busy"))?
            .model = None;
        Ok(())
    }
}

/// The loaded model, held for one request (the engine serves one at a time).
fn loaded(inner: &RefCell<Inner>) -> Result<RefMut<'_, Loaded>, JsValue> {
    let i = inner.try_borrow_mut().map_err(|_| {
        js_error(
            ErrorCode::Busy,
            "the engine is busy (one request at a time)",
        )
    })?;
    RefMut::filter_map(i, |i| i.model.as_mut())
        .map_err(|_| js_error(ErrorCode::NoModel, "no model is loaded"))
}

/// Whether to draft with the model's MTP layer: where it has one, unless `speculative` is off.
fn uses_mtp(session: &Session, speculative: Option<Speculative>) -> Result<bool, JsValue> {
    match speculative {
        Some(Speculative::Mtp) if !session.has_mtp() => Err(js_error(
            ErrorCode::InvalidArgument,
            "this model has no MTP layer: leave speculative out or set it to \"off\"",
        )),
        Some(Speculative::Off) => Ok(false),
        _ => Ok(session.has_mtp()),
    }
}

/// A generation after the prompt `prompt_of` makes from the loaded model: the options
/// parsed, the speculation chosen (MTP where the model has it, unless turned off), the text
/// streamed to `on_text` until it returns `false` or `stop` is set. The borrow of `inner` it
/// holds across its awaits is the one-request-at-a-time lock ([`loaded`]).
#[allow(clippy::await_holding_refcell_ref)]
async fn turn(
    inner: &RefCell<Inner>,
    stop: &Cell<bool>,
    options: &JsValue,
    on_text: &Function,
    prompt_of: impl FnOnce(&Loaded) -> Result<Vec<u32>, JsValue>,
) -> Result<JsValue, JsValue> {
    let opts: ChatOptions = if options.is_undefined() || options.is_null() {
        ChatOptions::default()
    } else {
        from_js(options, "options")?
    };
    let mut m = loaded(inner)?;
    let m = &mut *m;
    let prompt = prompt_of(m)?;
    let mtp = uses_mtp(&m.session, opts.speculative)?;
    let random = Sampling {
        seed: Some((js_sys::Math::random() * 9_007_199_254_740_991.0) as u64),
        ..Default::default()
    };
    let defaults = GenerateOptions::default();
    let gen = GenerateOptions {
        max_tokens: opts.max_tokens.unwrap_or(defaults.max_tokens).max(1),
        stop_at_eog: true,
        sampling: opts
            .sampling()
            .or(m.recommended.clone())
            .or(random)
            .over(SamplerParams::chat()),
        draft_max: opts.draft_max.unwrap_or(defaults.draft_max).max(1),
        ..defaults
    };
    stop.set(false);
    let mut drafter = Drafter::Mtp;
    let out = generate_with(
        &mut m.session,
        mtp.then_some(&mut drafter),
        &m.tokenizer,
        &prompt,
        &gen,
        |piece| {
            let go_on = on_text
                .call1(&JsValue::NULL, &JsValue::from_str(piece))
                .map(|r| r.as_bool() != Some(false))
                .unwrap_or(true);
            go_on && !stop.get()
        },
    )
    .await
    .map_err(engine_error)?;
    let finish_reason = match out.stop {
        StopReason::EndOfGeneration => FinishReason::Stop,
        StopReason::MaxTokens | StopReason::ContextFull => FinishReason::Length,
        StopReason::Stopped if stop.get() => FinishReason::Abort,
        StopReason::Stopped => FinishReason::Stop,
    };
    let n_eog = out
        .tokens
        .last()
        .is_some_and(|&t| m.tokenizer.is_end_of_generation(t)) as usize;
    let spec = out.speculation.unwrap_or_default();
    Ok(to_js(&ChatResult {
        finish_reason,
        prompt_tokens: prompt.len(),
        prefilled_tokens: out.prefilled,
        completion_tokens: out.tokens.len() - n_eog,
        prefill_seconds: out.prefill_seconds,
        decode_seconds: out.decode_seconds,
        prefill_tokens_per_second: out.prefill_tokens_per_second(),
        decode_tokens_per_second: out.decode_tokens_per_second(),
        draft_tokens: spec.drafted,
        accepted_tokens: spec.accepted,
        acceptance_rate: spec.acceptance_rate(),
        tokens_per_pass: spec.tokens_per_pass(),
        plain_tokens: spec.plain,
        text: out.text,
    }))
}

/// The size of this module's linear memory: it only grows, so after a load it is the most the
/// load held at once (weights stream through it to the GPU; wasm32 caps it at 4 GiB).
fn wasm_memory_bytes() -> f64 {
    Reflect::get(&wasm_bindgen::memory(), &"buffer".into())
        .and_then(|b| Reflect::get(&b, &"byteLength".into()))
        .ok()
        .and_then(|n| n.as_f64())
        .unwrap_or(0.0)
}

/// The engine crate's version, for the page's footer.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").into()
}
