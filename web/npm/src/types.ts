/** Public types of the Tandem npm package (OpenAI chat-completions shapes). */
import type { ChatDefaults, FinishReason } from "./contract.js";

export type { ChatDefaults, ChatOptions, ChatResult, ErrorCode, FinishReason } from "./contract.js";

export type Role = "system" | "user" | "assistant";

export interface ChatMessage {
  role: Role;
  content: string;
}

/** What chat and text completions share. */
export interface GenerationRequest {
  stream?: boolean;
  /**
   * Most tokens to generate. This and each sampling setting left out come from the model's
   * `engine.model.chatDefaults`: its GGUF's recommended sampling where it has one, else the
   * engine's `CHAT_DEFAULTS` (greedy), the same as the chat page and `tandem chat`.
   */
  max_tokens?: number;
  /** 0: greedy. */
  temperature?: number;
  top_p?: number;
  /** Tandem extension: top-k (at most 64 are kept on the GPU). */
  top_k?: number;
  /** Tandem extension: min-p. */
  min_p?: number;
  /** Maps to the repetition penalty 1 + frequency_penalty (llama.cpp style). */
  frequency_penalty?: number;
  seed?: number;
  /** Stop strings (the answer ends before the first one). */
  stop?: string | string[];
  /** Aborts the request; the stream then throws a TandemError with code "aborted". */
  signal?: AbortSignal;
  /** Ignored (one model is loaded); kept for compatibility with OpenAI client code. */
  model?: string;
  /**
   * Tandem extension, multi-token prediction: "mtp" drafts tokens with the model's MTP layer and
   * verifies them in one pass (greedy output unchanged; the default where the model has one),
   * "off" runs one token a pass.
   */
  speculative?: "mtp" | "off";
  /** Tandem extension: most draft tokens a step (default 4; the length adapts to the acceptance). */
  draft_max?: number;
}

export interface ChatCompletionRequest extends GenerationRequest {
  messages: ChatMessage[];
}

/** A text completion (OpenAI's legacy completions): the prompt continued as plain text, as a base model is used. */
export interface CompletionRequest extends GenerationRequest {
  prompt: string;
}

export interface CompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** Tandem's speed figures for the request. */
  extra: {
    prefill_tokens_per_second: number;
    decode_tokens_per_second: number;
    prefill_seconds: number;
    decode_seconds: number;
    /** Prompt tokens actually run (the rest came from the cached prefix of the conversation). */
    prefilled_tokens: number;
    /** Tokens the MTP layer drafted (0 without speculation). */
    draft_tokens: number;
    /** Of them, the tokens the model agreed with. */
    accepted_tokens: number;
    acceptance_rate: number;
    /** Tokens each verification pass yielded (0 without speculation). */
    tokens_per_pass: number;
    /** Tokens made by plain decode steps, where they measured faster than speculating (speculation pauses while they do). */
    plain_tokens: number;
  };
}

export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: {
    index: number;
    message: { role: "assistant"; content: string };
    finish_reason: FinishReason;
    logprobs: null;
  }[];
  usage: CompletionUsage;
}

export interface ChatCompletionChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: {
    index: number;
    delta: { role?: "assistant"; content?: string };
    finish_reason: FinishReason | null;
    logprobs: null;
  }[];
  /** On the last chunk only. */
  usage?: CompletionUsage;
}

export interface Completion {
  id: string;
  object: "text_completion";
  created: number;
  model: string;
  choices: { index: number; text: string; finish_reason: FinishReason; logprobs: null }[];
  usage: CompletionUsage;
}

export interface CompletionChunk {
  id: string;
  object: "text_completion";
  created: number;
  model: string;
  choices: { index: number; text: string; finish_reason: FinishReason | null; logprobs: null }[];
  /** On the last chunk only. */
  usage?: CompletionUsage;
}

/** Load progress. `phase` goes header -> tensors -> pipelines -> ready. */
export interface LoadProgress {
  phase: "download" | "header" | "tensors" | "pipelines" | "ready";
  /** File bytes received (download and tensors phases). */
  bytes?: number;
  totalBytes?: number;
  tensors?: number;
  totalTensors?: number;
  pipelines?: number;
  /** Where the bytes come from. */
  source?: "network" | "cache" | "file";
  /** 0..1, the best estimate of the whole load. */
  fraction: number;
  [key: string]: unknown;
}

export interface AdapterInfo {
  adapter: string;
  vendor: number;
  backend: string;
  deviceType: string;
  description: string;
  features: { f16: boolean; subgroups: boolean; timestamps: boolean; int8Dot: boolean };
  limits: Record<string, number>;
  /** The wasm module's linear memory now (it only grows: the most it ever held). */
  wasmMemoryBytes: number;
}

export interface ModelInfo {
  name: string;
  architecture: string;
  context: number;
  pipelines: number;
  dispatchesPerToken: number;
  /** Whether the model has an MTP layer (requests then speculate unless `speculative: "off"`). */
  mtp: boolean;
  /** Whether the model has a chat template; without one (a base model) use `engine.completions`. */
  chatTemplate: boolean;
  weightBytes: number;
  loadSeconds: number;
  uploadSeconds: number;
  pipelineSeconds: number;
  /**
   * The wasm module's linear memory after the load: the most the load held at once, since it
   * only grows (weights stream through it to the GPU a tensor at a time; wasm32 caps it at 4 GiB).
   */
  wasmMemoryBytes: number;
  source: "network" | "cache" | "file";
  /** What a chat request uses for each setting it leaves out. */
  chatDefaults: ChatDefaults;
}

/** A model: a URL (fetched, streamed, and kept in the Cache API), or a File/Blob. */
export type ModelSource = string | URL | Blob;

export interface EngineOptions {
  /** The model to load at once (optional: call engine.load later). */
  model?: ModelSource;
  onProgress?: (p: LoadProgress) => void;
  /** Run the engine in a Web Worker (default true where Worker exists). */
  worker?: boolean;
  /** Keep fetched models in the Cache API and read them from there next time (default true). */
  cache?: boolean;
  /** KV-cache positions (default: the model's context, at most 2048). */
  context?: number;
  /** Only the kernels without f16 and subgroups (as on every WebGPU adapter). */
  portable?: boolean;
  /** Where the engine's .wasm is (default: next to this module); bytes are accepted too. */
  wasm?: string | URL | BufferSource;
}

/** What `engine.bench` measures (`tandem bench`'s options). */
export interface BenchOptions {
  /** Distinct prompts, each run from an empty cache (default 20). */
  prompts?: number;
  /** Tokens per prompt (default 512). */
  promptTokens?: number;
  /** Tokens generated per prompt; decode is timed over all but the first (default 128). */
  genTokens?: number;
  /** Also time every kernel of one pass with GPU timestamps, where the adapter has them (default false). */
  profile?: boolean;
  /** Tokens of the profiled pass: 1 is a decode step, more a prompt chunk (default 1). */
  profileTokens?: number;
  /** Token counts of verification passes to time whole, each against a one-token pass (default none). */
  passTokens?: number[];
  /** Prompts as raw text in place of the pseudo-random ones (then `prompts` and `promptTokens` are unused): what multi-token prediction accepts depends on the text. */
  promptTexts?: string[];
  /** Multi-token prediction while decoding (default: "mtp" where the model has an MTP layer). */
  speculative?: "mtp" | "off";
  /** Most draft tokens a step (default 4; the length adapts to the acceptance). */
  draftMax?: number;
  /** Speculate on every step, even where plain decode steps measure faster (default false: each prompt's decoding times both as it goes and keeps to the faster, as chat does). */
  alwaysSpeculate?: boolean;
}

/** Median, min and max over the prompts, in tokens per second. */
export interface BenchSpread {
  median: number;
  min: number;
  max: number;
}

/** One kernel group of the profiled pass: the dispatches whose labels differ only in the layer. */
export interface BenchKernel {
  microseconds: number;
  dispatches: number;
  percent_of_pass: number;
  /** Bytes read (each byte once). */
  bytes: number;
  gigabytes_per_second: number;
  /** Of the streaming-read ceiling; null without one. */
  percent_of_ceiling: number | null;
  flops: number;
  /** null where the group does no matrix arithmetic. */
  teraflops_per_second: number | null;
}

/** `engine.bench`'s result: the object `tandem bench --json` prints, key for key. */
export interface BenchResult {
  adapter: string;
  prompts: number;
  prompt_tokens: number;
  gen_tokens: number;
  profile_tokens: number;
  prefill_tokens_per_second: BenchSpread;
  decode_tokens_per_second: BenchSpread;
  dispatches_per_token: number;
  /** With `profile` (bytes_per_second null where the adapter has no timestamp queries); else null. */
  streaming_read_ceiling: { bytes_per_second: number | null; buffer_bytes: number; kernel: "stream_read" } | null;
  /** Per kernel group; empty without `profile` or without timestamp queries. */
  kernels: Record<string, BenchKernel>;
  /** With `passTokens`: each pass's GPU time (median of 9), a one-token pass first; empty without timestamp queries. */
  passes: { bytes: number; microseconds: number; of_decode_pass: number; tokens: number }[];
  /** With speculation only: what the drafts did over all prompts. */
  speculation?: { draft_tokens: number; accepted_tokens: number; acceptance_rate: number; tokens_per_pass: number; plain_tokens: number };
}
