// The browser-engine arm of the cross-platform comparison (compare.mjs): the npm package's wasm
// engine in Node on Dawn (npm `webgpu`, the WebGPU implementation inside Chrome, Tint compiling the
// same WGSL), loading a GGUF over loopback HTTP as a tab loads a URL, then `engine.bench`, which
// runs `tandem bench`'s protocol (engine/src/bench.rs). Prints the bench JSON as the last line of
// stdout, with the load's figures under "load"; progress goes to stderr.
//
//   node bench/cross/browser-arm.mjs MODEL.gguf [--prompts 20] [-p 512] [-n 128] [--profile]
//        [--profile-tokens 1] [--portable] [--dawn TOGGLES] [--prompt-file FILE]
//        [--speculative mtp|off]
//
// --prompt-file and --speculative as `tandem bench`'s: the file's lines are the prompts.
//
// --dawn adds Dawn toggles to the instance, e.g. `enable-dawn-features=disable_robustness`: what
// a tab's safety and portability transforms cost, measured one at a time (compare.mjs --dawn).
//
// Dawn quantizes timestamps to 2^17 ns (about 131 µs) unless its `timestamp_quantization` toggle
// is off, as Chrome's does unless started with --enable-webgpu-developer-features: without this,
// every kernel of a decode step reads 0 or 131 µs.
import { basename, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { readFileSync, statSync } from "node:fs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const [model, ...args] = process.argv.slice(2);
const flag = (name) => args.includes(name);
const value = (names, dflt) => {
  const i = args.findIndex((a) => names.includes(a));
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
if (!model || model.startsWith("-")) {
  console.error("usage: browser-arm.mjs MODEL.gguf [--prompts N] [-p N] [-n N] [--profile] [--profile-tokens N] [--portable] [--dawn TOGGLES] [--prompt-file FILE] [--speculative mtp|off] [--always-speculate]");
  process.exit(2);
}
const opts = {
  prompts: value(["--prompts"], 20),
  promptTokens: value(["-p", "--prompt-tokens"], 512),
  genTokens: value(["-n", "--gen-tokens"], 128),
  profile: flag("--profile"),
  profileTokens: value(["--profile-tokens"], 1),
};
const text = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
if (text("--prompt-file")) {
  opts.promptTexts = readFileSync(text("--prompt-file"), "utf8").split("\n").filter((l) => l.trim());
  // A prompt has at most a token a byte and BOS: the context's bound before tokenizing.
  opts.promptTokens = Math.max(...opts.promptTexts.map((l) => Buffer.byteLength(l) + 1));
}
if (text("--speculative")) opts.speculative = text("--speculative");
if (flag("--always-speculate")) opts.alwaysSpeculate = true;

const { create, globals } = await import(resolve(root, "web/node_modules/webgpu/index.js"));
Object.assign(globalThis, globals);
const dawn = args.includes("--dawn") ? [args[args.indexOf("--dawn") + 1]] : [];
globalThis.navigator = { gpu: create(["disable-dawn-features=timestamp_quantization", ...dawn]) };
globalThis.Window = class {}; // wgpu looks for Window or WorkerGlobalScope
const { createEngine } = await import(resolve(root, "web/npm/dist/index.js"));
const { serve } = await import(resolve(root, "web/tests/serve.mjs"));

const path = resolve(model);
const { server, url } = await serve(root, dirname(path));
const t0 = performance.now();
const log = (s) => console.error(`[browser ${((performance.now() - t0) / 1000).toFixed(1)} s] ${s}`);
try {
  const engine = await createEngine({
    worker: false,
    portable: flag("--portable"),
    context: opts.promptTokens + opts.genTokens + opts.profileTokens,
  });
  log(`${engine.adapter.description}; features ${JSON.stringify(engine.adapter.features)}`);
  const size = statSync(path).size;
  let shown = 0;
  const info = await engine.load(`${url}/models/${encodeURIComponent(basename(path))}`, (p) => {
    if (p.phase !== "tensors") return log(`load: ${p.phase}`);
    const f = Number(p.bytes) / size;
    if (f >= shown + 0.1) {
      shown = Math.floor(f * 10) / 10;
      log(`load: ${(100 * f).toFixed(0)}% (${(Number(p.bytes) / 1e9 / ((performance.now() - t0) / 1000)).toFixed(2)} GB/s)`);
    }
  });
  log(`loaded in ${info.loadSeconds.toFixed(1)} s (upload ${info.uploadSeconds.toFixed(1)} s, ${(size / 1e9 / info.uploadSeconds).toFixed(2)} GB/s; pipelines ${info.pipelineSeconds.toFixed(1)} s); wasm memory ${(info.wasmMemoryBytes / 2 ** 20).toFixed(0)} MiB`);
  const r = await engine.bench(opts);
  r.load = {
    file_bytes: size,
    seconds: info.loadSeconds,
    upload_seconds: info.uploadSeconds,
    pipeline_seconds: info.pipelineSeconds,
    wasm_memory_bytes: info.wasmMemoryBytes,
    features: engine.adapter.features,
  };
  log(`decode ${r.decode_tokens_per_second.median.toFixed(1)} tok/s, prefill ${r.prefill_tokens_per_second.median.toFixed(1)} tok/s`);
  // On a line of its own: Dawn writes its warnings to stdout without ending the line.
  console.log(`\n${JSON.stringify(r)}`);
  await engine.dispose();
} catch (e) {
  console.error(`browser arm failed: ${e.code ? `[${e.code}] ` : ""}${e.stack || e}`);
  process.exitCode = 1;
} finally {
  server.close();
}
process.exit(process.exitCode ?? 0);
