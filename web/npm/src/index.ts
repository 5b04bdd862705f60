/**
 * Tandem in the browser: `createEngine({ model, onProgress })`, then
 * `engine.chat.completions.create({ messages, stream: true })` in the OpenAI shape (or
 * `engine.completions.create({ prompt })` for a base model's plain text). The engine (the
 * same Rust engine and WGSL kernels as the native CLI, compiled to wasm) runs in a Web Worker.
 */
import { TandemError, toTandemError } from "./errors.js";
import type { Reply, Request } from "./protocol.js";
import type { ChatOptions, ChatResult } from "./contract.js";
import type {
  AdapterInfo,
  BenchOptions,
  BenchResult,
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionRequest,
  Completion,
  CompletionChunk,
  CompletionRequest,
  CompletionUsage,
  EngineOptions,
  FinishReason,
  LoadProgress,
  ModelInfo,
  ModelSource,
} from "./types.js";

export * from "./types.js";
export { CACHE_NAME, CHAT_DEFAULTS, ERROR_CODES } from "./contract.js";
export { TandemError } from "./errors.js";
import { CACHE_NAME } from "./contract.js";

type Listener = (r: Reply) => void;

/** A channel to the engine: a worker, or the runtime on this thread. */
interface Transport {
  send(req: Request): void;
  listeners: Map<number, Listener>;
  close(): void;
}

function workerTransport(): Transport {
  const w = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
  const listeners = new Map<number, Listener>();
  w.onmessage = (ev: MessageEvent<Reply>) => listeners.get(ev.data.id)?.(ev.data);
  w.onerror = (ev) => {
    const msg = ev.message || "the engine's worker failed to start";
    for (const [id, l] of listeners) l({ id, type: "error", code: "engine_error", message: msg });
  };
  return { send: (r) => w.postMessage(r), listeners, close: () => w.terminate() };
}

async function directTransport(): Promise<Transport> {
  const { handle } = await import("./runtime.js");
  const listeners = new Map<number, Listener>();
  return {
    send: (r) => void handle(r, (reply) => listeners.get(reply.id)?.(reply)),
    listeners,
    close: () => {},
  };
}

let nextId = 1;

type WithoutId<T> = T extends unknown ? Omit<T, "id"> : never;

/** Sends `req` and resolves with its result; progress and tokens go to `on`. */
function call<T>(t: Transport, req: WithoutId<Request>, on?: (r: Reply) => void): Promise<T> {
  const id = nextId++;
  return new Promise<T>((resolve, reject) => {
    t.listeners.set(id, (r) => {
      if (r.type === "result") {
        t.listeners.delete(id);
        resolve(r.value as T);
      } else if (r.type === "error") {
        t.listeners.delete(id);
        reject(new TandemError(r.code, r.message));
      } else on?.(r);
    });
    t.send({ ...req, id } as Request);
  });
}

function stopList(stop: string | string[] | undefined): string[] {
  return (Array.isArray(stop) ? stop : stop ? [stop] : []).filter((s) => s.length > 0);
}

/** An async queue: the producer pushes, the consumer iterates. */
class Queue<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private waiting: ((r: IteratorResult<T>) => void) | null = null;
  private failed: unknown = null;
  private done = false;
  push(v: T) {
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      w({ value: v, done: false });
    } else this.items.push(v);
  }
  end(error?: unknown) {
    this.done = true;
    this.failed = error ?? null;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      if (error) this.reject?.(error);
      else w({ value: undefined as never, done: true });
    }
  }
  private reject: ((e: unknown) => void) | null = null;
  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.items.length) return Promise.resolve({ value: this.items.shift()!, done: false });
        if (this.done) return this.failed ? Promise.reject(this.failed) : Promise.resolve({ value: undefined as never, done: true });
        return new Promise((resolve, reject) => {
          this.waiting = resolve;
          this.reject = reject;
        });
      },
    };
  }
}

export class Engine {
  /** The adapter and the features in use (f16, subgroups). */
  readonly adapter: AdapterInfo;
  /** The loaded model, once loaded. */
  model: ModelInfo | null = null;
  private busy = false;

  readonly chat = {
    completions: {
      create: ((req: ChatCompletionRequest, opts?: { signal?: AbortSignal }) =>
        this.create({ kind: "chat", req }, opts?.signal ?? req.signal)) as {
        (req: ChatCompletionRequest & { stream: true }, opts?: { signal?: AbortSignal }): Promise<AsyncIterable<ChatCompletionChunk>>;
        (req: ChatCompletionRequest & { stream?: false }, opts?: { signal?: AbortSignal }): Promise<ChatCompletion>;
        (req: ChatCompletionRequest, opts?: { signal?: AbortSignal }): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>>;
      },
    },
  };

  /** Text completions: the prompt continued as plain text (a base model, one without a chat template). */
  readonly completions = {
    create: ((req: CompletionRequest, opts?: { signal?: AbortSignal }) =>
      this.create({ kind: "complete", req }, opts?.signal ?? req.signal)) as {
      (req: CompletionRequest & { stream: true }, opts?: { signal?: AbortSignal }): Promise<AsyncIterable<CompletionChunk>>;
      (req: CompletionRequest & { stream?: false }, opts?: { signal?: AbortSignal }): Promise<Completion>;
      (req: CompletionRequest, opts?: { signal?: AbortSignal }): Promise<Completion | AsyncIterable<CompletionChunk>>;
    },
  };

  /** @internal */
  constructor(
    private transport: Transport,
    adapter: AdapterInfo,
    private options: EngineOptions,
  ) {
    this.adapter = adapter;
  }

  /** Loads a model (a URL or a File/Blob), replacing the loaded one. */
  async load(model: ModelSource, onProgress?: (p: LoadProgress) => void): Promise<ModelInfo> {
    const src = model instanceof URL ? model.href : model;
    this.model = null;
    const info = await call<ModelInfo>(
      this.transport,
      { type: "load", model: src, cache: this.options.cache, context: this.options.context },
      (r) => r.type === "progress" && onProgress?.(r.value as LoadProgress),
    );
    this.model = info;
    return info;
  }

  /**
   * Runs `tandem bench`'s protocol on the loaded model: prefill and decode medians over distinct
   * prompts, each from an empty cache, dispatches per token, and with `profile` the GPU time of
   * every kernel (where the adapter has timestamp queries). Resolves to the object
   * `tandem bench --json` prints. The context must hold the longest prompt (promptTokens, or the
   * longest of promptTexts), genTokens and the widest of profileTokens and passTokens.
   */
  async bench(options: BenchOptions = {}): Promise<BenchResult> {
    if (!this.model) throw new TandemError("no_model", "no model is loaded");
    if (this.busy) throw new TandemError("busy", "one request at a time: wait for the running one or abort it");
    this.busy = true;
    try {
      return await call<BenchResult>(this.transport, { type: "bench", options });
    } finally {
      this.busy = false;
    }
  }

  /** Stops the running generation (its stream ends with finish_reason "abort"). */
  async stop(): Promise<void> {
    await call(this.transport, { type: "stop" });
  }

  /** Frees the model's GPU memory. */
  async unload(): Promise<void> {
    await call(this.transport, { type: "unload" });
    this.model = null;
  }

  /** Ends the engine (and its worker). */
  async dispose(): Promise<void> {
    await this.unload().catch(() => {});
    this.transport.close();
  }

  private async create(
    job: { kind: "chat"; req: ChatCompletionRequest } | { kind: "complete"; req: CompletionRequest },
    signal?: AbortSignal,
  ): Promise<ChatCompletion | Completion | AsyncIterable<ChatCompletionChunk | CompletionChunk>> {
    const req = job.req;
    if (!this.model) throw new TandemError("no_model", "no model is loaded");
    if (this.busy) throw new TandemError("busy", "one request at a time: wait for the running one or abort it");
    if (job.kind === "chat" && (!Array.isArray(job.req.messages) || job.req.messages.length === 0))
      throw new TandemError("invalid_argument", "messages must be a non-empty array");
    if (job.kind === "complete" && typeof job.req.prompt !== "string") throw new TandemError("invalid_argument", "prompt must be a string");
    if (signal?.aborted) throw new TandemError("aborted", "the request was aborted");
    const id = `${job.kind === "chat" ? "chatcmpl" : "cmpl"}-${Math.random().toString(36).slice(2, 14)}`;
    const created = Math.floor(Date.now() / 1000);
    const model = this.model.name;
    const stops = stopList(req.stop);
    const hold = stops.reduce((m, s) => Math.max(m, s.length - 1), 0);
    // What is left out, the engine takes from the model's chat defaults.
    const options: ChatOptions = {
      max_tokens: req.max_tokens,
      temperature: req.temperature,
      top_p: req.top_p,
      top_k: req.top_k,
      min_p: req.min_p,
      repeat_penalty: req.frequency_penalty === undefined ? undefined : 1 + req.frequency_penalty,
      seed: req.seed,
      speculative: req.speculative,
      draft_max: req.draft_max,
    };
    // A piece of the answer or its end (`finish`, with the usage) in the request's shape.
    type Delta = ChatCompletionChunk["choices"][0]["delta"];
    const chunk = (delta: Delta, finish: FinishReason | null, usage?: CompletionUsage): ChatCompletionChunk | CompletionChunk => {
      const end = { finish_reason: finish, logprobs: null };
      const rest = usage ? { usage } : {};
      return job.kind === "chat"
        ? { id, object: "chat.completion.chunk", created, model, choices: [{ index: 0, delta, ...end }], ...rest }
        : { id, object: "text_completion", created, model, choices: [{ index: 0, text: delta.content ?? "", ...end }], ...rest };
    };
    const queue = new Queue<ChatCompletionChunk | CompletionChunk>();
    // Text is emitted as it comes, but the last `hold` characters wait until no stop string can
    // start in them.
    let text = "";
    let sent = 0;
    let stopped = false;
    let aborted = false;
    const onAbort = () => {
      aborted = true;
      void this.stop();
    };
    signal?.addEventListener("abort", onAbort);
    // Free before the stream's end reaches the caller, who may send the next request at once.
    const release = () => {
      this.busy = false;
      signal?.removeEventListener("abort", onAbort);
    };
    if (job.kind === "chat") queue.push(chunk({ role: "assistant", content: "" }, null));
    this.busy = true;
    const request: WithoutId<Request> =
      job.kind === "chat"
        ? { type: "chat", messages: job.req.messages.map((m) => ({ role: m.role, content: String(m.content) })), options }
        : { type: "complete", prompt: job.req.prompt, options };
    const done = call<ChatResult>(this.transport, request, (r) => {
      if (r.type !== "token" || stopped) return;
      text += r.value;
      const at = stops.map((s) => text.indexOf(s, Math.max(0, sent - hold))).filter((i) => i >= 0);
      if (at.length) {
        text = text.slice(0, Math.min(...at));
        stopped = true;
        void this.stop();
      }
      const upto = stopped ? text.length : text.length - hold;
      if (upto > sent) {
        queue.push(chunk({ content: text.slice(sent, upto) }, null));
        sent = upto;
      }
    })
      .then((r) => {
        release();
        if (!stopped && text.length > sent) queue.push(chunk({ content: text.slice(sent) }, null));
        const finish: FinishReason = aborted ? "abort" : stopped ? "stop" : r.finish_reason;
        const usage: CompletionUsage = {
          prompt_tokens: r.prompt_tokens,
          completion_tokens: r.completion_tokens,
          total_tokens: r.prompt_tokens + r.completion_tokens,
          extra: {
            prefill_tokens_per_second: r.prefill_tokens_per_second,
            decode_tokens_per_second: r.decode_tokens_per_second,
            prefill_seconds: r.prefill_seconds,
            decode_seconds: r.decode_seconds,
            prefilled_tokens: r.prefilled_tokens,
            draft_tokens: r.draft_tokens,
            accepted_tokens: r.accepted_tokens,
            acceptance_rate: r.acceptance_rate,
            tokens_per_pass: r.tokens_per_pass,
            plain_tokens: r.plain_tokens,
          },
        };
        if (aborted) {
          queue.end(new TandemError("aborted", "the request was aborted"));
        } else {
          queue.push(chunk({}, finish, usage));
          queue.end();
        }
        return { finish, usage };
      })
      .catch((e) => {
        release();
        queue.end(toTandemError(e));
        throw toTandemError(e);
      });
    if (req.stream) {
      done.catch(() => {});
      return queue;
    }
    const { finish, usage } = await done;
    if (aborted) throw new TandemError("aborted", "the request was aborted");
    return job.kind === "chat"
      ? { id, object: "chat.completion", created, model, choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: finish, logprobs: null }], usage }
      : { id, object: "text_completion", created, model, choices: [{ index: 0, text, finish_reason: finish, logprobs: null }], usage };
  }
}

/**
 * Opens the GPU (in a worker by default) and, if `model` is given, loads it. Throws a TandemError
 * with code "no_webgpu" where the browser has no WebGPU.
 */
export async function createEngine(options: EngineOptions = {}): Promise<Engine> {
  const nav = (globalThis as { navigator?: { gpu?: unknown } }).navigator;
  if (!nav?.gpu) {
    throw new TandemError(
      "no_webgpu",
      "this browser has no WebGPU (navigator.gpu is missing): use a recent Chrome, Edge or Safari, or Firefox with WebGPU enabled",
    );
  }
  const useWorker = options.worker ?? typeof Worker !== "undefined";
  const transport = useWorker ? workerTransport() : await directTransport();
  let wasm = options.wasm;
  if (wasm instanceof URL) wasm = wasm.href;
  try {
    const adapter = await call<AdapterInfo>(transport, { type: "init", portable: options.portable, wasm });
    const engine = new Engine(transport, adapter, options);
    if (options.model !== undefined) await engine.load(options.model, options.onProgress);
    return engine;
  } catch (e) {
    transport.close();
    throw toTandemError(e);
  }
}

/** The models kept in the Cache API by earlier loads: URL and size in bytes. */
export async function listCachedModels(): Promise<{ url: string; bytes: number }[]> {
  if (typeof caches === "undefined") return [];
  const cache = await caches.open(CACHE_NAME);
  const out = [];
  for (const req of await cache.keys()) {
    const res = await cache.match(req);
    out.push({ url: req.url, bytes: Number(res?.headers.get("content-length") ?? 0) });
  }
  return out;
}

/** Removes a model from the cache. */
export async function deleteCachedModel(url: string): Promise<boolean> {
  if (typeof caches === "undefined") return false;
  return (await caches.open(CACHE_NAME)).delete(url);
}
