//! OpenAI's wire format: the request bodies `serve` reads, the objects it answers with, and the
//! error shape `{"error": {"message", "type", "param", "code"}}` with its HTTP status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use tandem_engine::generate::StopReason;
use tandem_engine::tokenizer::ChatMessage;

/// An error as OpenAI's API reports one.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// OpenAI's `type`: `invalid_request_error`, `authentication_error`, `server_error`...
    pub kind: &'static str,
    pub param: Option<&'static str>,
    pub code: Option<&'static str>,
}

impl ApiError {
    pub fn invalid(message: impl Into<String>, param: Option<&'static str>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param,
            code: None,
        }
    }

    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    pub fn server(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
            kind: "server_error",
            param: None,
            code: None,
        }
    }

    pub fn body(&self) -> Value {
        json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

/// Parses a JSON body, a malformed one being a 400 that says what is wrong.
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("the request body is not valid: {e}"), None))
}

#[derive(Deserialize)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<Message>,
    #[serde(flatten)]
    pub params: Params,
}

#[derive(Deserialize)]
pub struct CompletionRequest {
    pub model: Option<String>,
    pub prompt: Prompt,
    #[serde(flatten)]
    pub params: Params,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    One(String),
    Many(Vec<String>),
}

impl Prompt {
    /// The one prompt (a list of them would need `n` choices per prompt).
    pub fn text(self) -> Result<String, ApiError> {
        match self {
            Prompt::One(s) => Ok(s),
            Prompt::Many(mut v) if v.len() == 1 => Ok(v.remove(0)),
            Prompt::Many(_) => Err(ApiError::invalid(
                "only one prompt a request is supported",
                Some("prompt"),
            )),
        }
    }
}

#[derive(Deserialize)]
pub struct Message {
    pub role: String,
    pub content: Option<Content>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
pub struct Part {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
}

/// The messages as the chat template takes them (text parts joined; other parts refused).
pub fn chat_messages(messages: Vec<Message>) -> Result<Vec<ChatMessage>, ApiError> {
    if messages.is_empty() {
        return Err(ApiError::invalid(
            "messages is empty: give at least one message",
            Some("messages"),
        ));
    }
    messages
        .into_iter()
        .map(|m| {
            let content = match m.content {
                None => String::new(),
                Some(Content::Text(s)) => s,
                Some(Content::Parts(parts)) => parts
                    .into_iter()
                    .map(|p| match (p.kind.as_str(), p.text) {
                        ("text", Some(t)) => Ok(t),
                        (kind, _) => Err(ApiError::invalid(
                            format!("content parts of type {kind:?} are not supported (text only)"),
                            Some("messages"),
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?
                    .concat(),
            };
            Ok(ChatMessage::new(m.role, content))
        })
        .collect()
}

/// The generation fields both endpoints share.
#[derive(Deserialize, Default)]
pub struct Params {
    pub max_tokens: Option<u32>,
    pub max_completion_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub seed: Option<i64>,
    pub stop: Option<Stop>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub n: Option<u32>,
    /// llama-server's extension: generate past end-of-generation tokens (for benchmarks).
    pub ignore_eos: Option<bool>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
pub struct StreamOptions {
    pub include_usage: Option<bool>,
}

impl Params {
    /// Checks the fields' ranges as OpenAI does.
    pub fn check(&self) -> Result<(), ApiError> {
        if self.n.is_some_and(|n| n != 1) {
            return Err(ApiError::invalid("only n=1 is supported", Some("n")));
        }
        if self.temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
            return Err(ApiError::invalid(
                "temperature must be between 0 and 2",
                Some("temperature"),
            ));
        }
        if self.top_p.is_some_and(|p| !(p > 0.0 && p <= 1.0)) {
            return Err(ApiError::invalid(
                "top_p must be greater than 0 and at most 1",
                Some("top_p"),
            ));
        }
        if self.max_tokens() == Some(0) {
            return Err(ApiError::invalid(
                "max_tokens must be at least 1",
                Some("max_tokens"),
            ));
        }
        if self.stops().len() > 4 {
            return Err(ApiError::invalid("at most 4 stop sequences", Some("stop")));
        }
        Ok(())
    }

    /// `max_completion_tokens`, else the older `max_tokens`.
    pub fn max_tokens(&self) -> Option<u32> {
        self.max_completion_tokens.or(self.max_tokens)
    }

    pub fn stops(&self) -> Vec<String> {
        match &self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s.clone()],
            Some(Stop::Many(v)) => v.clone(),
        }
    }

    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }
}

/// Why a reply ended, as OpenAI names it: an end token or a stop string, or the length limit.
pub fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::MaxTokens | StopReason::ContextFull => "length",
        StopReason::EndOfGeneration | StopReason::Stopped => "stop",
    }
}

/// The two endpoints' reply shapes: `chat.completion` and `text_completion`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Chat,
    Completion,
}

/// What the replies of one request have in common.
pub struct Reply {
    pub kind: Kind,
    pub id: String,
    pub created: u64,
    pub model: String,
}

pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
}

impl Usage {
    fn json(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        })
    }
}

impl Reply {
    fn object(&self, choices: Value, chunk: bool) -> Value {
        let object = match (self.kind, chunk) {
            (Kind::Chat, false) => "chat.completion",
            (Kind::Chat, true) => "chat.completion.chunk",
            (Kind::Completion, _) => "text_completion",
        };
        json!({
            "id": self.id,
            "object": object,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": null,
            "choices": choices,
        })
    }

    /// The whole reply of a request that did not stream.
    pub fn full(&self, text: &str, finish: &str, usage: &Usage) -> Value {
        let choice = match self.kind {
            Kind::Chat => json!({
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": null,
                "finish_reason": finish,
            }),
            Kind::Completion => json!({
                "index": 0,
                "text": text,
                "logprobs": null,
                "finish_reason": finish,
            }),
        };
        let mut v = self.object(json!([choice]), false);
        v["usage"] = usage.json();
        v
    }

    /// A streamed piece: `text`, or with `finish` the last piece (no text).
    pub fn chunk(&self, text: Option<&str>, finish: Option<&str>) -> Value {
        let choice = match self.kind {
            Kind::Chat => json!({
                "index": 0,
                "delta": text.map_or(json!({}), |t| json!({"content": t})),
                "logprobs": null,
                "finish_reason": finish,
            }),
            Kind::Completion => json!({
                "index": 0,
                "text": text.unwrap_or(""),
                "logprobs": null,
                "finish_reason": finish,
            }),
        };
        self.object(json!([choice]), true)
    }

    /// The first streamed chunk of a chat reply: the assistant's role.
    pub fn role_chunk(&self) -> Value {
        self.object(
            json!([{
                "index": 0,
                "delta": {"role": "assistant", "content": ""},
                "logprobs": null,
                "finish_reason": null,
            }]),
            true,
        )
    }

    /// The chunk `stream_options.include_usage` asks for after the last one: no choices.
    pub fn usage_chunk(&self, usage: &Usage) -> Value {
        let mut v = self.object(json!([]), true);
        v["usage"] = usage.json();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_content_forms_and_refuses_images() {
        let req: ChatRequest = parse(
            br#"{"model":"m","messages":[{"role":"system","content":"be brief"},
                {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
                "stop":"x","max_completion_tokens":3,"stream_options":{"include_usage":true}}"#,
        )
        .unwrap();
        assert_eq!(req.params.max_tokens(), Some(3));
        assert_eq!(req.params.stops(), vec!["x".to_string()]);
        assert!(req.params.include_usage());
        let m = chat_messages(req.messages).unwrap();
        assert_eq!((m[1].role.as_str(), m[1].content.as_str()), ("user", "ab"));
        let img: ChatRequest = parse(
            br#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}"#,
        )
        .unwrap();
        let e = chat_messages(img.messages).unwrap_err();
        assert_eq!(
            (e.status, e.param),
            (StatusCode::BAD_REQUEST, Some("messages"))
        );
    }

    #[test]
    fn out_of_range_fields_name_their_param() {
        for (body, param) in [
            (r#"{"n":2}"#, "n"),
            (r#"{"temperature":2.5}"#, "temperature"),
            (r#"{"top_p":0}"#, "top_p"),
            (r#"{"max_tokens":0}"#, "max_tokens"),
            (r#"{"stop":["a","b","c","d","e"]}"#, "stop"),
        ] {
            let p: Params = parse(body.as_bytes()).unwrap();
            assert_eq!(p.check().unwrap_err().param, Some(param), "{body}");
        }
        let Err(e) = parse::<ChatRequest>(b"{\"messages\": 3}") else {
            panic!("a number for messages was read");
        };
        assert_eq!(e.body()["error"]["type"], "invalid_request_error");
    }
}
