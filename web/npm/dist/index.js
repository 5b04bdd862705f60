import {
  TandemError,
  toTandemError
} from "./chunk-W7IN3UGP.js";

// npm/src/index.ts
var CACHE_NAME = "tandem-models";
function workerTransport() {
  const w = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
  const listeners = /* @__PURE__ */ new Map();
  w.onmessage = (ev) => listeners.get(ev.data.id)?.(ev.data);
  w.onerror = (ev) => {
    const msg = ev.message || "the engine's worker failed to start";
    for (const [id, l] of listeners) l({ id, type: "error", code: "engine_error", message: msg });
  };
  return { send: (r) => w.postMessage(r), listeners, close: () => w.terminate() };
}
async function directTransport() {
  const { handle } = await import("./runtime-5S5V5XZD.js");
  const listeners = /* @__PURE__ */ new Map();
  return {
    send: (r) => void handle(r, (reply) => listeners.get(reply.id)?.(reply)),
    listeners,
    close: () => {
    }
  };
}
var nextId = 1;
function call(t, req, on) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    t.listeners.set(id, (r) => {
      if (r.type === "result") {
        t.listeners.delete(id);
        resolve(r.value);
      } else if (r.type === "error") {
        t.listeners.delete(id);
        reject(new TandemError(r.code, r.message));
      } else on?.(r);
    });
    t.send({ ...req, id });
  });
}
function stopList(stop) {
  return (Array.isArray(stop) ? stop : stop ? [stop] : []).filter((s) => s.length > 0);
}
var Queue = class {
  items = [];
  waiting = null;
  failed = null;
  done = false;
  push(v) {
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      w({ value: v, done: false });
    } else this.items.push(v);
  }
  end(error) {
    this.done = true;
    this.failed = error ?? null;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      if (error) this.reject?.(error);
      else w({ value: void 0, done: true });
    }
  }
  reject = null;
  [Symbol.asyncIterator]() {
    return {
      next: () => {
        if (this.items.length) return Promise.resolve({ value: this.items.shift(), done: false });
        if (this.done) return this.failed ? Promise.reject(this.failed) : Promise.resolve({ value: void 0, done: true });
        return new Promise((resolve, reject) => {
          this.waiting = resolve;
          this.reject = reject;
        });
      }
    };
  }
};
var Engine = class {
  /** @internal */
  constructor(transport, adapter, options) {
    this.transport = transport;
    this.options = options;
    this.adapter = adapter;
  }
  transport;
  options;
  /** The adapter and the features in use (f16, subgroups). */
  adapter;
  /** The loaded model, once loaded. */
  model = null;
  busy = false;
  chat = {
    completions: {
      create: ((req, opts) => this.create(req, opts?.signal ?? req.signal))
    }
  };
  /** Loads a model (a URL or a File/Blob), replacing the loaded one. */
  async load(model, onProgress) {
    const src = model instanceof URL ? model.href : model;
    this.model = null;
    const info = await call(
      this.transport,
      { type: "load", model: src, cache: this.options.cache, context: this.options.context },
      (r) => r.type === "progress" && onProgress?.(r.value)
    );
    this.model = info;
    return info;
  }
  /** Stops the running generation (its stream ends with finish_reason "abort"). */
  async stop() {
    await call(this.transport, { type: "stop" });
  }
  /** Frees the model's GPU memory. */
  async unload() {
    await call(this.transport, { type: "unload" });
    this.model = null;
  }
  /** Ends the engine (and its worker). */
  async dispose() {
    await this.unload().catch(() => {
    });
    this.transport.close();
  }
  async create(req, signal) {
    if (!this.model) throw new TandemError("no_model", "no model is loaded");
    if (this.busy) throw new TandemError("busy", "one request at a time: wait for the running one or abort it");
    if (!Array.isArray(req.messages) || req.messages.length === 0)
      throw new TandemError("invalid_argument", "messages must be a non-empty array");
    if (signal?.aborted) throw new TandemError("aborted", "the request was aborted");
    const id = `chatcmpl-${Math.random().toString(36).slice(2, 14)}`;
    const created = Math.floor(Date.now() / 1e3);
    const model = this.model.name;
    const stops = stopList(req.stop);
    const hold = stops.reduce((m, s) => Math.max(m, s.length - 1), 0);
    const options = {
      max_tokens: req.max_tokens ?? 256,
      temperature: req.temperature ?? 0,
      top_p: req.top_p ?? 1,
      top_k: req.top_k ?? 0,
      min_p: req.min_p ?? 0,
      repeat_penalty: 1 + (req.frequency_penalty ?? 0),
      seed: req.seed
    };
    const chunk = (delta, finish2, usage2) => ({
      id,
      object: "chat.completion.chunk",
      created,
      model,
      choices: [{ index: 0, delta, finish_reason: finish2, logprobs: null }],
      ...usage2 ? { usage: usage2 } : {}
    });
    const queue = new Queue();
    let text = "";
    let sent = 0;
    let stopped = false;
    let aborted = false;
    const onAbort = () => {
      aborted = true;
      void this.stop();
    };
    signal?.addEventListener("abort", onAbort);
    queue.push(chunk({ role: "assistant", content: "" }, null));
    this.busy = true;
    const done = call(
      this.transport,
      { type: "chat", messages: req.messages.map((m) => ({ role: m.role, content: String(m.content) })), options },
      (r) => {
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
      }
    ).then((r) => {
      if (!stopped && text.length > sent) queue.push(chunk({ content: text.slice(sent) }, null));
      const finish2 = aborted ? "abort" : stopped ? "stop" : r.finish_reason;
      const usage2 = {
        prompt_tokens: Number(r.prompt_tokens),
        completion_tokens: Number(r.completion_tokens),
        total_tokens: Number(r.prompt_tokens) + Number(r.completion_tokens),
        extra: {
          prefill_tokens_per_second: Number(r.prefill_tokens_per_second),
          decode_tokens_per_second: Number(r.decode_tokens_per_second),
          prefill_seconds: Number(r.prefill_seconds),
          decode_seconds: Number(r.decode_seconds),
          prefilled_tokens: Number(r.prefilled_tokens)
        }
      };
      if (aborted) {
        queue.end(new TandemError("aborted", "the request was aborted"));
      } else {
        queue.push(chunk({}, finish2, usage2));
        queue.end();
      }
      return { finish: finish2, usage: usage2 };
    }).catch((e) => {
      queue.end(toTandemError(e));
      throw toTandemError(e);
    }).finally(() => {
      this.busy = false;
      signal?.removeEventListener("abort", onAbort);
    });
    if (req.stream) {
      done.catch(() => {
      });
      return queue;
    }
    const { finish, usage } = await done;
    if (aborted) throw new TandemError("aborted", "the request was aborted");
    return {
      id,
      object: "chat.completion",
      created,
      model,
      choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: finish, logprobs: null }],
      usage
    };
  }
};
async function createEngine(options = {}) {
  const nav = globalThis.navigator;
  if (!nav?.gpu) {
    throw new TandemError(
      "no_webgpu",
      "this browser has no WebGPU (navigator.gpu is missing): use a recent Chrome, Edge or Safari, or Firefox with WebGPU enabled"
    );
  }
  const useWorker = options.worker ?? typeof Worker !== "undefined";
  const transport = useWorker ? workerTransport() : await directTransport();
  let wasm = options.wasm;
  if (wasm instanceof URL) wasm = wasm.href;
  try {
    const adapter = await call(transport, { type: "init", portable: options.portable, wasm });
    const engine = new Engine(transport, adapter, options);
    if (options.model !== void 0) await engine.load(options.model, options.onProgress);
    return engine;
  } catch (e) {
    transport.close();
    throw toTandemError(e);
  }
}
async function listCachedModels() {
  if (typeof caches === "undefined") return [];
  const cache = await caches.open(CACHE_NAME);
  const out = [];
  for (const req of await cache.keys()) {
    const res = await cache.match(req);
    out.push({ url: req.url, bytes: Number(res?.headers.get("content-length") ?? 0) });
  }
  return out;
}
async function deleteCachedModel(url) {
  if (typeof caches === "undefined") return false;
  return (await caches.open(CACHE_NAME)).delete(url);
}
export {
  CACHE_NAME,
  Engine,
  TandemError,
  createEngine,
  deleteCachedModel,
  listCachedModels
};
//# sourceMappingURL=index.js.map
