// The npm package's public API in Node, on Dawn's WebGPU (npm `webgpu`, SwiftShader here): load the
// default model over HTTP, one streamed completion, one non-streamed, `engine.bench` on the tiny
// fixture, text completions with multi-token prediction on the MTP demo model, and the error cases.
// Run after `npm --prefix web run build`: node web/tests/node-api.mjs
import assert from "node:assert/strict";
import { statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { create, globals } from "webgpu";
import { serve, modelDir, DEFAULT_MODEL } from "./serve.mjs";

process.env.VK_ICD_FILENAMES ??= "/usr/lib/chromium/vk_swiftshader_icd.json";
Object.assign(globalThis, globals);
// Dawn rounds timestamps to 2^17 ns unless this toggle is off (Chrome: unless started with
// --enable-webgpu-developer-features); the bench's per-kernel times need them unrounded.
globalThis.navigator = { gpu: create(["disable-dawn-features=timestamp_quantization"]) };
globalThis.Window = class {}; // wgpu looks for Window or WorkerGlobalScope

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const { createEngine, TandemError, CHAT_DEFAULTS, ERROR_CODES } = await import(resolve(root, "web/npm/dist/index.js"));
const { server, url } = await serve(root);
const t0 = performance.now();
let failures = 0;
const step = async (name, f) => {
  try {
    await f();
    console.log(`ok   ${name} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e.stack || e}`);
  }
};

let engine;
await step("createEngine loads the default model with progress", async () => {
  const phases = new Set();
  engine = await createEngine({ model: `${url}/models/${DEFAULT_MODEL}`, worker: false, onProgress: (p) => phases.add(p.phase) });
  assert.ok(engine.adapter.adapter !== undefined);
  assert.deepEqual([...phases], ["header", "tensors", "pipelines", "ready"]);
  assert.equal(engine.model.name, DEFAULT_MODEL);
  // The default model recommends no sampling: it chats with the engine's defaults, which the
  // package's generated contract mirrors.
  assert.deepEqual(engine.model.chatDefaults, CHAT_DEFAULTS);
  assert.ok(ERROR_CODES.includes("bad_gguf") && ERROR_CODES.includes("network"));
});

await step("the engine has the adapter's subgroups and shader-f16 (wgpu's WebGPU backend asks for neither subgroups nor reports them)", async () => {
  const a = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  assert.equal(engine.adapter.features.subgroups, a.features.has("subgroups"));
  assert.equal(engine.adapter.features.f16, a.features.has("shader-f16"));
  assert.equal(engine.adapter.features.timestamps, a.features.has("timestamp-query"));
  console.log(`     ${engine.adapter.description}`);
});

await step("the load streams: the wasm heap stays below the file's size", async () => {
  const size = statSync(join(modelDir(), DEFAULT_MODEL)).size;
  const mem = engine.model.wasmMemoryBytes;
  assert.ok(Number.isFinite(mem) && mem > 0, `wasmMemoryBytes ${mem}`);
  assert.ok(mem < size, `wasm memory ${mem} B after loading a ${size} B file`);
  console.log(`     wasm memory ${(mem / 2 ** 20).toFixed(0)} MiB after loading ${(size / 2 ** 20).toFixed(0)} MiB`);
});

console.log(`     load: ${engine.model.loadSeconds.toFixed(1)} s (upload ${engine.model.uploadSeconds.toFixed(1)} s, pipelines ${engine.model.pipelineSeconds.toFixed(1)} s)`);
await step("a streamed completion in the OpenAI shape", async () => {
  const stream = await engine.chat.completions.create({
    messages: [{ role: "user", content: "What is the capital of France?" }],
    stream: true,
    max_tokens: 3, // decode is slow on SwiftShader (see the web branch's notes); the page test checks the answer
  });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  assert.ok(chunks.every((c) => c.object === "chat.completion.chunk"));
  const text = chunks.map((c) => c.choices[0].delta.content ?? "").join("");
  const pieces = chunks.filter((c) => c.choices[0].delta.content).length;
  assert.ok(pieces >= 2, `${pieces} content chunks`);
  const last = chunks.at(-1);
  assert.ok(["stop", "length"].includes(last.choices[0].finish_reason));
  assert.ok(text.length > 0);
  assert.ok(last.usage.completion_tokens > 0 && last.usage.prompt_tokens > 0);
  console.log(`     ${JSON.stringify(text)}; prefill ${last.usage.extra.prefill_tokens_per_second.toFixed(1)} tok/s, decode ${last.usage.extra.decode_tokens_per_second.toFixed(1)} tok/s`);
});

if (process.env.TANDEM_LONG) await step("a completion with a stop string", async () => {
  const r = await engine.chat.completions.create({
    messages: [{ role: "user", content: "What is the capital of France?" }],
    max_tokens: 10,
    stop: ["Paris"],
  });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices[0].finish_reason, "stop");
  assert.ok(!r.choices[0].message.content.includes("Paris"));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

await step("engine.bench returns tandem bench's JSON (tiny-llama fixture)", async () => {
  await engine.load(`${url}/tests/fixtures/tiny-llama.gguf`);
  const r = await engine.bench({ prompts: 2, promptTokens: 4, genTokens: 3, profile: true, passTokens: [2] });
  // The keys `tandem bench --json` prints (native/src/bench.rs, engine/src/bench.rs).
  assert.deepEqual(Object.keys(r).sort(), [
    "adapter", "decode_tokens_per_second", "dispatches_per_token", "gen_tokens", "kernels", "passes",
    "prefill_tokens_per_second", "profile_tokens", "prompt_tokens", "prompts", "streaming_read_ceiling",
  ]);
  assert.deepEqual([r.prompts, r.prompt_tokens, r.gen_tokens, r.profile_tokens], [2, 4, 3, 1]);
  assert.ok(typeof r.adapter === "string" && r.adapter.length > 0);
  const positive = (x, what) => assert.ok(Number.isFinite(x) && x > 0, `${what}: ${x}`);
  for (const k of ["prefill_tokens_per_second", "decode_tokens_per_second"]) {
    assert.deepEqual(Object.keys(r[k]).sort(), ["max", "median", "min"]);
    for (const v of ["max", "median", "min"]) positive(r[k][v], `${k}.${v}`);
    assert.ok(r[k].min <= r[k].median && r[k].median <= r[k].max);
  }
  assert.ok(Number.isInteger(r.dispatches_per_token) && r.dispatches_per_token > 0);
  const c = r.streaming_read_ceiling;
  assert.deepEqual(Object.keys(c).sort(), ["buffer_bytes", "bytes_per_second", "kernel"]);
  assert.equal(c.kernel, "stream_read");
  positive(c.buffer_bytes, "buffer_bytes");
  let detail;
  if (engine.adapter.features.timestamps) {
    positive(c.bytes_per_second, "bytes_per_second");
    const groups = Object.entries(r.kernels);
    assert.ok(groups.length > 0, "no kernel groups");
    for (const [name, g] of groups) {
      assert.deepEqual(Object.keys(g).sort(), [
        "bytes", "dispatches", "flops", "gigabytes_per_second", "microseconds", "percent_of_ceiling",
        "percent_of_pass", "teraflops_per_second",
      ], name);
      positive(g.dispatches, `${name}.dispatches`);
      assert.ok(Number.isFinite(g.microseconds) && g.microseconds >= 0, `${name}.microseconds`);
    }
    const n = groups.reduce((a, [, g]) => a + g.dispatches, 0);
    assert.equal(n, r.dispatches_per_token);
    const pass = groups.reduce((a, [, g]) => a + g.percent_of_pass, 0);
    assert.ok(Math.abs(pass - 100) < 1e-6, `percent_of_pass sums to ${pass}`);
    // Rounded timestamps would make every group a multiple of 2^17 ns.
    const q = 131.072;
    assert.ok(groups.some(([, g]) => Math.abs(g.microseconds / q - Math.round(g.microseconds / q)) > 1e-3), "timestamps are quantized");
    // A one-token pass, the base of the ratios, then the asked-for 2-token pass.
    assert.deepEqual(r.passes.map((p) => p.tokens), [1, 2]);
    assert.equal(r.passes[0].of_decode_pass, 1);
    for (const p of r.passes) {
      positive(p.microseconds, `pass of ${p.tokens}`);
      positive(p.bytes, `bytes of the pass of ${p.tokens}`);
    }
    detail = `${groups.length} kernel groups, a 2-token pass ${r.passes[1].of_decode_pass.toFixed(2)}x a 1-token one`;
  } else {
    assert.equal(c.bytes_per_second, null);
    assert.deepEqual(r.kernels, {});
    assert.deepEqual(r.passes, []);
    detail = "profile skipped: the adapter has no timestamp queries";
  }
  console.log(`     prefill ${r.prefill_tokens_per_second.median.toFixed(1)} tok/s, decode ${r.decode_tokens_per_second.median.toFixed(1)} tok/s, ${r.dispatches_per_token} dispatches per token; ${detail}`);
});

await step("completions with multi-token prediction: the MTP demo model, same greedy text as without, and the acceptance in usage", async () => {
  const info = await engine.load(`${url}/tests/fixtures/glm4moe-mtp-demo-q8_0.gguf`);
  assert.equal(info.mtp, true);
  assert.equal(info.chatTemplate, false);
  const req = { prompt: "The president said that the nation", max_tokens: 24, temperature: 0 };
  const off = await engine.completions.create({ ...req, speculative: "off" });
  const chunks = [];
  for await (const c of await engine.completions.create({ ...req, stream: true })) chunks.push(c);
  assert.ok(chunks.every((c) => c.object === "text_completion"));
  const text = chunks.map((c) => c.choices[0].text).join("");
  assert.equal(off.object, "text_completion");
  assert.ok(off.choices[0].text.length > 0);
  assert.equal(text, off.choices[0].text, "greedy text with MTP differs from the text without");
  const x = chunks.at(-1).usage.extra;
  assert.equal(off.usage.extra.draft_tokens, 0);
  assert.ok(x.draft_tokens > 0 && x.accepted_tokens <= x.draft_tokens, JSON.stringify(x));
  assert.ok(Math.abs(x.acceptance_rate - x.accepted_tokens / x.draft_tokens) < 1e-9);
  assert.ok(x.tokens_per_pass >= 1, `tokens_per_pass ${x.tokens_per_pass}`);
  assert.equal(typeof x.plain_tokens, "number");
  await assert.rejects(engine.chat.completions.create({ messages: [{ role: "user", content: "hi" }] }), (e) => e instanceof TandemError && e.code === "template_error");
  const b = await engine.bench({ prompts: 1, promptTokens: 4, genTokens: 8 });
  assert.ok(b.speculation.draft_tokens > 0 && b.speculation.tokens_per_pass >= 1, JSON.stringify(b.speculation));
  assert.equal((await engine.bench({ prompts: 1, promptTokens: 4, genTokens: 3, speculative: "off" })).speculation, undefined);
  // 24 tokens: a window of 16 speculating, then plain steps timed against it (the speed guard),
  // unless every step must speculate.
  const guarded = await engine.bench({ prompts: 1, promptTokens: 4, genTokens: 24 });
  assert.ok(guarded.speculation.plain_tokens > 0, JSON.stringify(guarded.speculation));
  const always = await engine.bench({ prompts: 1, promptTokens: 4, genTokens: 24, alwaysSpeculate: true });
  assert.equal(always.speculation.plain_tokens, 0, JSON.stringify(always.speculation));
  // The session's guard now decodes plainly (the runs above timed both modes): drafts on text
  // prompts are asked for.
  const bt = await engine.bench({ promptTexts: ["the quick brown fox", "jumps over the lazy dog"], genTokens: 4, alwaysSpeculate: true });
  assert.equal(bt.prompts, 2);
  assert.ok(bt.prompt_tokens >= 5 && bt.speculation.draft_tokens > 0, JSON.stringify(bt));
  console.log(`     ${JSON.stringify(text)}; ${x.accepted_tokens} of ${x.draft_tokens} drafts accepted, ${x.tokens_per_pass.toFixed(2)} tokens a pass`);
});

await step("speculative \"mtp\" on a model without an MTP layer is invalid_argument", async () => {
  await engine.load(`${url}/tests/fixtures/tiny-llama.gguf`);
  await assert.rejects(engine.completions.create({ prompt: "a", max_tokens: 2, speculative: "mtp" }), (e) => e instanceof TandemError && e.code === "invalid_argument");
});

await step("a bad GGUF is a TandemError with code bad_gguf", async () => {
  await assert.rejects(engine.load(`${url}/index.html`), (e) => e instanceof TandemError && e.code === "bad_gguf");
});

await step("a missing URL is a TandemError with code network", async () => {
  await assert.rejects(engine.load(`${url}/models/nope.gguf`), (e) => e instanceof TandemError && e.code === "network");
});

await engine?.dispose();
server.close();
console.log(failures ? `${failures} failed` : "node API: all passed");
process.exit(failures ? 1 : 0);
