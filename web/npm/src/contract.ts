// Generated from web/src/contract.rs by `TANDEM_BLESS=1 cargo test -p tandem-web`: do not edit.

/** The Cache API cache fetched models are kept in. */
export const CACHE_NAME = "tandem-models";

/** Every error code a TandemError can carry. */
export const ERROR_CODES = [
  /** The browser has no WebGPU, or no adapter. */
  "no_webgpu",
  /** Reserved: the engine needs no optional WebGPU feature today. */
  "missing_feature",
  /** The model needs more than the adapter's limits allow. */
  "model_too_large",
  /** An architecture, tensor type or metadata key Tandem does not support. */
  "unsupported_model",
  /** The file is not a valid GGUF (or is truncated). */
  "bad_gguf",
  /** The GPU device was lost. */
  "device_lost",
  /** A WebGPU error (a shader, a buffer). */
  "gpu_error",
  /** The conversation does not fit in the context. */
  "context_overflow",
  /** The tokenizer or the chat template failed, or the model has none. */
  "template_error",
  /** An argument of the call is wrong. */
  "invalid_argument",
  /** Reading the model failed. */
  "io",
  /** The engine runs another request (one at a time). */
  "busy",
  /** No model is loaded. */
  "no_model",
  /** Fetching the model failed (thrown by the package). */
  "network",
  /** The request was aborted (thrown by the package). */
  "aborted",
  /** Anything else. */
  "engine_error",
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** Why a generation ended: an end token or stop string, the token or context limit, stop(). */
export type FinishReason = "stop" | "length" | "abort";

/** The engine's options for one chat turn; each one left out comes from the model's ChatDefaults. */
export interface ChatOptions {
  /** Most tokens to generate. */
  max_tokens?: number;
  /** 0: greedy (argmax). */
  temperature?: number;
  /** Keep the K most likely tokens (at most 64 on the GPU; 0: 64). */
  top_k?: number;
  /** Keep the most likely tokens whose probabilities add up to P. */
  top_p?: number;
  /** Drop tokens less likely than P times the most likely one. */
  min_p?: number;
  /** Penalise the last repeat_last_n tokens (1: off). */
  repeat_penalty?: number;
  /** How many recent tokens the penalty looks at. */
  repeat_last_n?: number;
  /** Random seed (default: random). */
  seed?: number;
  /** "mtp": draft tokens with the model's MTP layer and verify them in one pass (greedy output unchanged; the default where the model has one). "off": one token a pass. */
  speculative?: "mtp" | "off";
  /** Most draft tokens a step (default 4; the length adapts to the acceptance). */
  draft_max?: number;
}

/** What a chat turn uses where its options leave something out: the model's recommended sampling (general.sampling.* in its GGUF) over the engine's chat defaults. */
export interface ChatDefaults {
  max_tokens: number;
  /** 0: greedy. */
  temperature: number;
  top_k: number;
  top_p: number;
  min_p: number;
  repeat_penalty: number;
  repeat_last_n: number;
}

/** What the engine's chat call resolves to. */
export interface ChatResult {
  /** The answer. */
  text: string;
  finish_reason: FinishReason;
  /** Tokens of the rendered conversation. */
  prompt_tokens: number;
  /** Prompt tokens actually run (the rest came from the cached prefix). */
  prefilled_tokens: number;
  /** Generated tokens, the end-of-generation token not counted. */
  completion_tokens: number;
  prefill_seconds: number;
  decode_seconds: number;
  prefill_tokens_per_second: number;
  decode_tokens_per_second: number;
  /** Tokens the MTP layer drafted (0 without speculation). */
  draft_tokens: number;
  /** Of them, the tokens the model agreed with. */
  accepted_tokens: number;
  /** accepted_tokens / draft_tokens. */
  acceptance_rate: number;
  /** Tokens each verification pass yielded (0 without speculation). */
  tokens_per_pass: number;
  /** Tokens made by plain decode steps, where they measured faster than speculating. */
  plain_tokens: number;
}

/** The engine's chat defaults, for a model that recommends no sampling (greedy: a small model's first token is often a near tie). */
export const CHAT_DEFAULTS: ChatDefaults = {
  "max_tokens": 256,
  "temperature": 0.0,
  "top_k": 40,
  "top_p": 0.95,
  "min_p": 0.05,
  "repeat_penalty": 1.0,
  "repeat_last_n": 64
};
