/**
 * The side of the package that runs the wasm engine: in the Web Worker (worker.ts) or, with
 * `worker: false` (and in Node), on the caller's thread. It turns a model source into a byte
 * stream for the engine, keeps fetched models in the Cache API, and answers the protocol's
 * requests.
 */
import init, { Engine } from "../wasm/tandem_web.js";
import { TandemError, toTandemError } from "./errors.js";
import { CACHE_NAME } from "./contract.js";
import type { Request, Reply } from "./protocol.js";

type Post = (m: Reply) => void;

let engine: Engine | null = null;
let ready: Promise<Engine> | null = null;

async function loadWasm(wasm: unknown) {
  let source = wasm ?? new URL("./tandem_web_bg.wasm", import.meta.url);
  if ((source instanceof URL || typeof source === "string") && String(source).startsWith("file:")) {
    // Node: fetch cannot read files.
    const fs = await import(/* @vite-ignore */ "node:fs/promises" as string);
    source = await fs.readFile(new URL(String(source)));
  }
  await init({ module_or_path: source as never });
}

function hasCaches(): boolean {
  return typeof caches !== "undefined";
}

/** A byte stream of the model, its length, and what to do once the engine has read what it needs. */
interface Opened {
  reader: ReadableStreamDefaultReader<Uint8Array>;
  length: number;
  name: string;
  source: "network" | "cache" | "file";
  /** Drains the rest (so the cache gets the whole file) after a successful load. */
  finish(): Promise<void>;
  /** Stops the download and drops the partial cache entry after a failed load. */
  fail(reason: unknown): Promise<void>;
}

function baseUrl(): string | undefined {
  const loc = (globalThis as { location?: { href: string } }).location;
  return loc?.href;
}

async function open(model: string | Blob, useCache: boolean): Promise<Opened> {
  if (typeof model !== "string") {
    const name = (model as File).name ?? "model.gguf";
    const reader = model.stream().getReader();
    return {
      reader,
      length: model.size,
      name,
      source: "file",
      finish: async () => reader.cancel().catch(() => {}),
      fail: async () => reader.cancel().catch(() => {}),
    };
  }
  const url = new URL(model, baseUrl()).href;
  const name = decodeURIComponent(url.split("/").pop() || url);
  const cache = useCache && hasCaches() ? await caches.open(CACHE_NAME) : null;
  const hit = cache ? await cache.match(url) : undefined;
  if (hit && hit.body) {
    const reader = hit.body.getReader();
    return {
      reader,
      length: Number(hit.headers.get("content-length") ?? 0),
      name,
      source: "cache",
      finish: async () => reader.cancel().catch(() => {}),
      fail: async () => reader.cancel().catch(() => {}),
    };
  }
  let res: Response;
  try {
    res = await fetch(url);
  } catch (e) {
    throw new TandemError("network", `fetching ${url} failed: ${(e as Error).message ?? e}`);
  }
  if (!res.ok || !res.body) {
    throw new TandemError("network", `fetching ${url} failed: HTTP ${res.status} ${res.statusText}`);
  }
  const length = Number(res.headers.get("content-length") ?? 0);
  const inner = res.body.getReader();
  if (!cache) {
    return {
      reader: inner,
      length,
      name,
      source: "network",
      finish: async () => inner.cancel().catch(() => {}),
      fail: async () => inner.cancel().catch(() => {}),
    };
  }
  // Every chunk the engine reads also goes into the cache, without a second copy in memory.
  let ctl!: ReadableStreamDefaultController<Uint8Array>;
  const toCache = new ReadableStream<Uint8Array>({ start: (c) => void (ctl = c) });
  const headers = new Headers({ "content-type": "application/octet-stream" });
  if (length) headers.set("content-length", String(length));
  const stored = cache.put(url, new Response(toCache, { headers })).catch(() => {});
  let closed = false;
  const reader = {
    async read() {
      const r = await inner.read();
      if (r.done) {
        if (!closed) ctl.close();
        closed = true;
      } else {
        ctl.enqueue(r.value.slice());
      }
      return r;
    },
    cancel: (reason?: unknown) => inner.cancel(reason),
    releaseLock: () => inner.releaseLock(),
    closed: inner.closed,
  } as unknown as ReadableStreamDefaultReader<Uint8Array>;
  return {
    reader,
    length,
    name,
    source: "network",
    async finish() {
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
      }
      await stored;
    },
    async fail(reason) {
      if (!closed) ctl.error(reason);
      closed = true;
      await inner.cancel().catch(() => {});
      await stored;
      await cache.delete(url).catch(() => false);
    },
  };
}

/** Answers one request; replies go through `post` (progress and tokens before the result). */
export async function handle(req: Request, post: Post): Promise<void> {
  const { id } = req;
  try {
    switch (req.type) {
      case "init": {
        if (!ready) {
          ready = (async () => {
            await loadWasm(req.wasm);
            engine = (await Engine.create({ portable: !!req.portable })) as Engine;
            return engine;
          })();
          ready.catch(() => (ready = null));
        }
        const e = await ready;
        post({ id, type: "result", value: e.info() });
        return;
      }
      case "load": {
        const e = need();
        const src = await open(req.model, req.cache !== false);
        const total = src.length;
        const progress = (p: Record<string, unknown>) => {
          let fraction = 0;
          if (p.phase === "tensors") fraction = 0.95 * (Number(p.tensorBytes) / Math.max(1, Number(p.totalTensorBytes)));
          else if (p.phase === "pipelines") fraction = 0.96;
          else if (p.phase === "ready") fraction = 1;
          post({ id, type: "progress", value: { ...p, source: src.source, totalBytes: total || p.totalBytes, fraction } });
        };
        let summary: Record<string, unknown>;
        try {
          summary = await e.load(src.reader, total, { name: src.name, context: req.context }, progress);
        } catch (err) {
          await src.fail(err);
          throw err;
        }
        await src.finish();
        post({ id, type: "result", value: { ...summary, source: src.source } });
        return;
      }
      case "chat":
      case "complete": {
        const e = need();
        const onText = (piece: string) => {
          post({ id, type: "token", value: piece });
          return true;
        };
        const value = await (req.type === "chat" ? e.chat(req.messages, req.options, onText) : e.complete(req.prompt, req.options, onText));
        post({ id, type: "result", value });
        return;
      }
      case "bench": {
        const value = await need().bench(req.options);
        post({ id, type: "result", value });
        return;
      }
      case "stop":
        engine?.stop();
        post({ id, type: "result", value: null });
        return;
      case "unload":
        engine?.stop();
        engine?.unload();
        post({ id, type: "result", value: null });
        return;
    }
  } catch (e) {
    const t = toTandemError(e);
    post({ id, type: "error", code: t.code, message: t.message });
  }
}

function need(): Engine {
  if (!engine) throw new TandemError("engine_error", "the engine is not initialised");
  return engine;
}
