//! The HTTP side: routes, the API key, and the handlers, which turn a request into tokens and
//! generation options, hand it to the engine thread and stream or gather its reply.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::{self, Stream, StreamExt};
use serde_json::{json, Value};
use tandem_engine::generate::{GenerateOptions, Generation, StopReason};
use tandem_engine::sampling::{Mode, Sampling};
use tandem_engine::tokenizer::{ChatTemplate, Tokenizer};
use tokio::sync::mpsc;

use super::metrics::Metrics;
use super::openai::{self, ApiError, ChatRequest, CompletionRequest, Kind, Params, Reply, Usage};
use super::scheduler::{Command, Event, Job, Ticket};
use super::Health;
use crate::args::sampler_params;

/// What every handler reads.
pub struct App {
    /// The name the model is served under (`--alias`, else the file's stem).
    pub model_id: String,
    pub tokenizer: Arc<Tokenizer>,
    /// The model's chat template, where it has one.
    pub template: Option<ChatTemplate>,
    pub recommended: Sampling,
    pub ctx: u32,
    pub api_key: Option<String>,
    pub parallel: usize,
    pub queue: usize,
    pub jobs: Sender<Command>,
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
    /// `--debug-endpoints`: serve `POST /debug/lose-device`.
    pub debug_endpoints: bool,
    pub started: u64,
    /// Numbers the replies' ids.
    pub next_id: AtomicU64,
}

pub fn router(app: Arc<App>) -> Router {
    let mut keyed = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics));
    if app.debug_endpoints {
        keyed = keyed.route("/debug/lose-device", post(lose_device));
    }
    let keyed = keyed.route_layer(middleware::from_fn_with_state(app.clone(), check_key));
    Router::new()
        .merge(keyed)
        .route("/health", get(health))
        .fallback(|| async {
            ApiError::invalid("no such endpoint", None)
                .with_status(StatusCode::NOT_FOUND)
                .with_code("unknown_url")
        })
        .layer(middleware::from_fn_with_state(app.clone(), count))
        .with_state(app)
}

/// Counts every response by status.
async fn count(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    app.metrics.count_response(res.status().as_u16());
    res
}

/// With `--api-key`, every route but `/health` wants `Authorization: Bearer <key>`.
async fn check_key(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if let Some(key) = &app.api_key {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if given != Some(key.as_str()) {
            let what = if given.is_some() {
                "Incorrect API key provided"
            } else {
                "No API key provided: send it as 'Authorization: Bearer <key>'"
            };
            return ApiError {
                status: StatusCode::UNAUTHORIZED,
                message: what.into(),
                kind: "invalid_request_error",
                param: None,
                code: Some("invalid_api_key"),
            }
            .into_response();
        }
    }
    next.run(req).await
}

/// 200 while the server can generate; 503 with the reason while it cannot (the device was lost
/// and the model is being loaded again).
async fn health(State(app): State<Arc<App>>) -> Response {
    match app.health.problem() {
        None => Json(json!({"status": "ok"})).into_response(),
        Some(problem) => ApiError::server(problem)
            .with_status(StatusCode::SERVICE_UNAVAILABLE)
            .with_code("unavailable")
            .into_response(),
    }
}

/// Destroys the GPU device (`--debug-endpoints`): what follows is what follows a real loss.
async fn lose_device(State(app): State<Arc<App>>) -> Result<Json<Value>, ApiError> {
    app.jobs
        .send(Command::LoseDevice)
        .map_err(|_| ApiError::server("the engine has stopped"))?;
    Ok(Json(json!({"status": "destroying the GPU device"})))
}

async fn models(State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!({
        "object": "list",
        "data": [{
            "id": app.model_id,
            "object": "model",
            "created": app.started,
            "owned_by": "tandem",
            "context_length": app.ctx,
        }],
    }))
}

async fn metrics(State(app): State<Arc<App>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.metrics.render(app.parallel),
    )
}

async fn chat_completions(State(app): State<Arc<App>>, body: Bytes) -> Result<Response, ApiError> {
    let req: ChatRequest = openai::parse(&body)?;
    app.check_model(req.model.as_deref())?;
    req.params.check()?;
    let messages = openai::chat_messages(req.messages)?;
    let template = app.template.as_ref().ok_or_else(|| {
        ApiError::invalid(
            "this model has no chat template (a base model?): use /v1/completions",
            Some("messages"),
        )
    })?;
    let prompt = crate::run::chat_tokens(&app.tokenizer, template, &messages)
        .map_err(|e| ApiError::invalid(e.to_string(), Some("messages")))?;
    app.generate(Kind::Chat, prompt, req.params).await
}

async fn completions(State(app): State<Arc<App>>, body: Bytes) -> Result<Response, ApiError> {
    let req: CompletionRequest = openai::parse(&body)?;
    app.check_model(req.model.as_deref())?;
    req.params.check()?;
    let text = req.prompt.text()?;
    let prompt = app
        .tokenizer
        .encode(&text, true, false)
        .map_err(|e| ApiError::invalid(e.to_string(), Some("prompt")))?;
    if prompt.is_empty() {
        return Err(ApiError::invalid("the prompt is empty", Some("prompt")));
    }
    app.generate(Kind::Completion, prompt, req.params).await
}

impl App {
    fn check_model(&self, model: Option<&str>) -> Result<(), ApiError> {
        match model {
            Some(m) if m != self.model_id => Err(ApiError::invalid(
                format!(
                    "The model `{m}` does not exist; this server serves `{}`",
                    self.model_id
                ),
                Some("model"),
            )
            .with_status(StatusCode::NOT_FOUND)
            .with_code("model_not_found")),
            _ => Ok(()),
        }
    }

    /// Queues the generation and answers with its reply: streamed as server-sent events, or
    /// whole once it is done.
    async fn generate(
        self: &Arc<Self>,
        kind: Kind,
        prompt: Vec<u32>,
        params: Params,
    ) -> Result<Response, ApiError> {
        let param = match kind {
            Kind::Chat => "messages",
            Kind::Completion => "prompt",
        };
        if prompt.len() >= self.ctx as usize {
            return Err(ApiError::invalid(
                format!(
                    "This model's maximum context length is {} tokens, but the prompt is {} \
                     tokens (no room left to generate); shorten it, or start the server with a \
                     larger -c",
                    self.ctx,
                    prompt.len()
                ),
                Some(param),
            )
            .with_code("context_length_exceeded"));
        }
        let (mode, default_max) = match kind {
            Kind::Chat => (Mode::Chat, self.ctx as usize),
            // OpenAI's default for the legacy endpoint.
            Kind::Completion => (Mode::Text, 16),
        };
        let choice = Sampling {
            temperature: params.temperature,
            top_p: params.top_p,
            seed: params.seed.map(|s| s as u64),
            ..Default::default()
        };
        let opts = GenerateOptions {
            max_tokens: params.max_tokens().map_or(default_max, |n| n as usize),
            stop_at_eog: !params.ignore_eos.unwrap_or(false),
            sampling: sampler_params(choice, &self.recommended, mode),
            ..Default::default()
        };
        let ticket = Ticket::take(&self.metrics, self.parallel + self.queue).ok_or_else(|| {
            ApiError::server(format!(
                "The server is full: all {} slots are generating and {} requests are waiting \
                 (--parallel, --queue); retry later",
                self.parallel, self.queue
            ))
            .with_status(StatusCode::SERVICE_UNAVAILABLE)
            .with_code("queue_full")
        })?;
        let (events, rx) = mpsc::unbounded_channel();
        let prompt_tokens = prompt.len();
        self.jobs
            .send(Command::Generate(Job {
                prompt,
                opts,
                stop: params.stops(),
                events,
                ticket,
            }))
            .map_err(|_| ApiError::server("the engine has stopped"))?;
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let reply = Reply {
            kind,
            id: match kind {
                Kind::Chat => format!("chatcmpl-{n}"),
                Kind::Completion => format!("cmpl-{n}"),
            },
            created: crate::serve::unix_now(),
            model: self.model_id.clone(),
        };
        if params.stream.unwrap_or(false) {
            let events = stream_events(reply, rx, prompt_tokens, params.include_usage());
            Ok(Sse::new(events).into_response())
        } else {
            whole(reply, rx, prompt_tokens).await
        }
    }
}

fn usage(g: &Generation, prompt_tokens: usize) -> Usage {
    let end_token = (g.stop == StopReason::EndOfGeneration) as usize;
    Usage {
        prompt_tokens,
        completion_tokens: g.tokens.len() - end_token,
    }
}

/// Gathers the reply of a request that does not stream.
async fn whole(
    reply: Reply,
    mut rx: mpsc::UnboundedReceiver<Event>,
    prompt_tokens: usize,
) -> Result<Response, ApiError> {
    let mut text = String::new();
    while let Some(e) = rx.recv().await {
        match e {
            Event::Text(t) => text.push_str(&t),
            Event::Done(g) => {
                let finish = openai::finish_reason(g.stop);
                let body = reply.full(&text, finish, &usage(&g, prompt_tokens));
                return Ok(Json(body).into_response());
            }
            Event::Failed(m) => return Err(ApiError::server(m)),
        }
    }
    Err(ApiError::server(
        "the engine stopped before the reply was done",
    ))
}

/// The reply as server-sent events: OpenAI's chunks, then `[DONE]`. An error after the stream
/// has begun comes as an `{"error": ...}` event.
fn stream_events(
    reply: Reply,
    rx: mpsc::UnboundedReceiver<Event>,
    prompt_tokens: usize,
    include_usage: bool,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    let data = |v: Value| SseEvent::default().data(v.to_string());
    let first = match reply.kind {
        Kind::Chat => vec![data(reply.role_chunk())],
        Kind::Completion => vec![],
    };
    let events = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) });
    let rest = events.flat_map(move |e| {
        let out = match e {
            Event::Text(t) => vec![data(reply.chunk(Some(&t), None))],
            Event::Done(g) => {
                let mut out = vec![data(reply.chunk(None, Some(openai::finish_reason(g.stop))))];
                if include_usage {
                    out.push(data(reply.usage_chunk(&usage(&g, prompt_tokens))));
                }
                out.push(SseEvent::default().data("[DONE]"));
                out
            }
            Event::Failed(m) => vec![data(ApiError::server(m).body())],
        };
        stream::iter(out)
    });
    stream::iter(first).chain(rest).map(Ok)
}
