// The cross-platform comparison: the same GGUF, the same GPU, the same kernels, driven by the
// native binary (`tandem bench --json --profile`, wgpu over Vulkan/Metal/DX12) and by the browser
// engine (the npm package's wasm in Node on Dawn, browser-arm.mjs), interleaved A B B A in one run
// (MEASURE.md rule 4). Prints per token (decode, prefill) and per kernel group (GPU µs of one
// decode step) side by side with the ratio, and writes the runs as JSON and an SVG plot.
//
//   node bench/cross/compare.mjs MODEL.gguf [--tandem PATH] [--prompts 20] [-p 512] [-n 128]
//        [--prompt-file FILE] [--profile-tokens 1] [--portable] [--browser-portable]
//        [--dawn TOGGLES]... [--mtp-arms] [--rounds 2] [--timeout 600] [--out DIR] [--name NAME]
//   node bench/cross/compare.mjs --render cross-NAME.json [--out DIR]
//
// --portable adds the native binary with only the kernels without shader-f16 and subgroups,
// --browser-portable the browser engine likewise: what those features are worth, kernel by kernel.
// Each --dawn adds a browser-engine arm with those Dawn toggles (browser-arm.mjs), e.g.
// `enable-dawn-features=disable_robustness`: which of a tab's transforms a gap comes from.
// --prompt-file feeds both engines a file's lines as the prompts (`tandem bench --prompt-file`).
// --mtp-arms, on a model with an MTP layer: the native and browser arms decode without
// speculation, two more speculate on every step (`--speculative mtp --always-speculate`) and two
// more as a user's generation does, speculating while it measures faster than plain steps
// (`--speculative mtp`), so the table gives each engine's speed with and without multi-token
// prediction, what the drafts did, and what the speed guard keeps of the faster.
// --render prints the table and writes the plot again from a saved comparison's runs (runs added
// to its "runs" by hand, from another log of the same call, are summarized like the others).
// Each arm runs in its own process with its own timeout; an arm that fails is reported and left
// out of the summary, the others still run. TANDEM_CROSS_NATIVE_ICD and TANDEM_CROSS_BROWSER_ICD
// set VK_ICD_FILENAMES for one side only (for machines without a GPU, see scripts/test-web.sh).
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { svg } from "./plot.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const rendering = process.argv[2] === "--render";
const [model, ...args] = process.argv.slice(rendering ? 3 : 2);
const flag = (name) => args.includes(name);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
if (!model || model.startsWith("-")) {
  console.error("usage: compare.mjs MODEL.gguf [--tandem PATH] [--prompts N] [-p N] [-n N] [--prompt-file FILE] [--profile-tokens N] [--portable] [--browser-portable] [--dawn TOGGLES]... [--mtp-arms] [--rounds N] [--timeout S] [--out DIR] [--name NAME]\n       compare.mjs --render cross-NAME.json [--out DIR]");
  process.exit(2);
}
const saved = rendering ? JSON.parse(readFileSync(model, "utf8")) : null;
const promptFile = opt("--prompt-file");
const bench = saved?.bench ?? {
  prompts: promptFile ? readFileSync(promptFile, "utf8").split("\n").filter((l) => l.trim()).length : Number(opt("--prompts", 20)),
  prompt: promptFile ? basename(promptFile) : Number(opt("-p", 512)),
  gen: Number(opt("-n", 128)),
  profileTokens: Number(opt("--profile-tokens", 1)),
};
const tandem = resolve(opt("--tandem", join(root, "target/release/tandem")));
const rounds = saved?.rounds ?? Number(opt("--rounds", 2));
const timeout = Number(opt("--timeout", 600));
const out = resolve(opt("--out", "."));
const name = saved?.name ?? opt("--name", basename(model).replace(/\.gguf$/, ""));
const prompts = promptFile ? ["--prompt-file", promptFile] : ["--prompts", bench.prompts, "-p", bench.prompt];
const mtpArms = flag("--mtp-arms");
const common = [...prompts, "-n", bench.gen, "--profile", "--profile-tokens", bench.profileTokens].map(String);

// Where one machine has no Vulkan driver both can use (CI's Mesa 22 lavapipe, which Dawn
// refuses), each side's ICD can be named apart; on a real GPU both use the same driver.
const icd = (v) => (v ? { ...process.env, VK_ICD_FILENAMES: v } : process.env);
const nativeEnv = icd(process.env.TANDEM_CROSS_NATIVE_ICD);
const browserEnv = icd(process.env.TANDEM_CROSS_BROWSER_ICD);
const arms = [
  { arm: "native", cmd: tandem, args: ["bench", "-m", model, "--json", ...common], env: nativeEnv },
  { arm: "browser", cmd: process.execPath, args: [join(here, "browser-arm.mjs"), model, ...common], env: browserEnv },
];
if (flag("--portable")) arms.push({ ...arms[0], arm: "native-portable", args: [...arms[0].args, "--portable"] });
args.forEach((a, i) => {
  if (a === "--dawn") arms.push({ ...arms[1], arm: `browser ${args[i + 1].replace(/^.*=/, "")}`, args: [...arms[1].args, "--dawn", args[i + 1]] });
});
if (flag("--browser-portable")) arms.push({ ...arms[1], arm: "browser-portable", args: [...arms[1].args, "--portable"] });
if (mtpArms) {
  const plain = arms.map((a) => ({ ...a, args: [...a.args, "--speculative", "off"] }));
  const mtp = arms.slice(0, 2).map((a) => ({ ...a, arm: `${a.arm} mtp`, args: [...a.args, "--speculative", "mtp", "--always-speculate"] }));
  const guarded = arms.slice(0, 2).map((a) => ({ ...a, arm: `${a.arm} guarded`, args: [...a.args, "--speculative", "mtp"] }));
  arms.splice(0, arms.length, ...plain, ...mtp, ...guarded);
}

const t0 = performance.now();
const since = () => ((performance.now() - t0) / 1000).toFixed(1);

/** Runs one arm; resolves to its bench JSON (the last stdout line that is one) or to an error string. */
function runArm({ arm, cmd, args, env }) {
  return new Promise((done) => {
    console.error(`[${since()} s] ${arm}: ${cmd} ${args.join(" ")}`);
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], env });
    let stdout = "";
    let tail = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => {
      tail = (tail + d).slice(-4000);
      for (const line of String(d).split("\n")) if (line.trim()) console.error(`  ${arm}| ${line}`);
    });
    const timer = setTimeout(() => {
      console.error(`[${since()} s] ${arm}: timed out after ${timeout} s`);
      child.kill("SIGKILL");
    }, timeout * 1000);
    child.on("error", (e) => {
      clearTimeout(timer);
      done({ error: `${arm}: ${e.message}` });
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      // The JSON is the last line that is one; Dawn may print its own notes on stdout after it.
      const lines = stdout.trim().split("\n");
      const json = lines.findLastIndex((l) => l.startsWith("{"));
      for (const l of lines.filter((_, i) => i !== json && lines[i].trim())) console.error(`  ${arm}| stdout: ${l}`);
      try {
        if (code !== 0) throw new Error(`exit ${code ?? signal}`);
        if (json < 0) throw new Error("no JSON line on stdout");
        const r = JSON.parse(lines[json]);
        console.error(`[${since()} s] ${arm}: decode ${r.decode_tokens_per_second.median.toFixed(1)} tok/s, prefill ${r.prefill_tokens_per_second.median.toFixed(1)} tok/s`);
        done(r);
      } catch (e) {
        done({ error: `${arm}: ${e.message}; stderr ends: ${tail.slice(-600)}` });
      }
    });
  });
}

const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};

// A B B A: every arm once per round, the order reversed every other round.
const runs = saved?.runs ?? [];
for (let r = 0; !saved && r < rounds; r++) {
  for (const a of r % 2 ? [...arms].reverse() : arms) runs.push({ arm: a.arm, round: r, result: await runArm(a) });
}
const armNames = [...new Set(saved ? runs.map((r) => r.arm) : arms.map((a) => a.arm))];

/** One arm over its runs: medians of the runs' medians, min and max over all, kernels' median µs. */
function summarize(arm) {
  const ok = runs.filter((r) => r.arm === arm && !r.result.error).map((r) => r.result);
  if (!ok.length) return null;
  const speed = (k) => ({
    median: median(ok.map((r) => r[k].median)),
    min: Math.min(...ok.map((r) => r[k].min)),
    max: Math.max(...ok.map((r) => r[k].max)),
  });
  const kernels = {};
  for (const g of new Set(ok.flatMap((r) => Object.keys(r.kernels)))) {
    const have = ok.filter((r) => r.kernels[g]);
    kernels[g] = {
      dispatches: have[0].kernels[g].dispatches,
      microseconds: median(have.map((r) => r.kernels[g].microseconds)),
      gigabytes_per_second: median(have.map((r) => r.kernels[g].gigabytes_per_second)),
    };
  }
  const ceiling = ok.map((r) => r.streaming_read_ceiling?.bytes_per_second).filter((x) => x);
  return {
    arm,
    runs: ok.length,
    adapter: ok[0].adapter,
    decode: speed("decode_tokens_per_second"),
    prefill: speed("prefill_tokens_per_second"),
    dispatches_per_token: ok[0].dispatches_per_token,
    ceiling_gb_per_second: ceiling.length ? median(ceiling) / 1e9 : null,
    kernels,
    step_microseconds: Object.values(kernels).reduce((a, g) => a + g.microseconds, 0),
    load: ok[0].load ?? null,
    // What the drafts did (greedy: the same in every run of an arm).
    speculation: ok[0].speculation ?? null,
  };
}
const summary = armNames.map(summarize).filter(Boolean);
const failed = runs.filter((r) => r.result.error).map((r) => r.result.error);

// The table.
const pad = (s, n) => String(s).padStart(n);
const fmt = (x, d = 1) => (x == null || !Number.isFinite(x) ? "-" : x.toFixed(d));
const base = summary.find((s) => s.arm === "native");
const ratio = (x, y) => (x && y ? `${(x / y).toFixed(2)}x` : "-");
const file = saved?.file_bytes ?? statSync(model).size;
const given = typeof bench.prompt === "string" ? `the lines of ${bench.prompt}` : `${bench.prompt} prompt tokens`;
console.log(`\n== ${name} (${(file / 1e9).toFixed(2)} GB): ${bench.prompts} prompts, ${given}, ${bench.gen} generated, ${rounds} rounds, arm order reversed every other round (A B B A)`);
for (const s of summary) console.log(`   ${s.arm}: ${s.adapter}`);
const cols = summary.map((s) => s.arm);
const w = Math.max(18, ...cols.map((c) => c.length + 2));
console.log(`\n   ${"".padEnd(22)}${cols.map((c) => pad(c, w)).join("")}${cols.slice(1).map((c) => pad(`${c}/native`, w + 8)).join("")}`);
const row = (label, f, d = 1, better = "higher") => {
  const v = summary.map(f);
  const r = v.slice(1).map((x) => pad(better === "higher" ? ratio(x, v[0]) : ratio(v[0], x), w + 8));
  console.log(`   ${label.padEnd(22)}${v.map((x) => pad(fmt(x, d), w)).join("")}${r.join("")}`);
};
const spread = (label, k) =>
  console.log(`   ${label.padEnd(22)}${summary.map((s) => pad(`${fmt(s[k].min)}-${fmt(s[k].max)}`, w)).join("")}`);
row("decode tok/s", (s) => s.decode.median);
spread("  min-max", "decode");
row("decode ms/token", (s) => 1000 / s.decode.median, 3, "lower");
row("prefill tok/s", (s) => s.prefill.median);
spread("  min-max", "prefill");
row("prefill µs/token", (s) => 1e6 / s.prefill.median, 1, "lower");
row("dispatches/token", (s) => s.dispatches_per_token, 0);
row("decode step GPU µs", (s) => s.step_microseconds, 1, "lower");
row("stream read GB/s", (s) => s.ceiling_gb_per_second, 1);
if (summary.some((s) => s.speculation)) {
  row("MTP acceptance", (s) => s.speculation?.acceptance_rate, 3);
  row("tokens a verify pass", (s) => s.speculation?.tokens_per_pass, 2);
  row("tokens by plain steps", (s) => s.speculation?.plain_tokens, 0);
}
const loads = summary.filter((s) => s.load);
for (const s of loads) {
  console.log(`   ${s.arm} load: ${fmt(s.load.seconds)} s (${fmt(s.load.file_bytes / 1e9 / s.load.upload_seconds, 2)} GB/s upload), wasm memory ${fmt(s.load.wasm_memory_bytes / 2 ** 20, 0)} MiB, features ${JSON.stringify(s.load.features)}`);
}
const groups = base ? Object.keys(base.kernels).sort((a, b) => base.kernels[b].microseconds - base.kernels[a].microseconds) : [];
for (const s of summary) for (const g of Object.keys(s.kernels)) if (!groups.includes(g)) groups.push(g);
if (groups.length) {
  console.log(`\n   one decode step (${bench.profileTokens} token), GPU µs per kernel group, median of the runs; ratio: arm µs / native µs`);
  const gw = Math.max(24, ...groups.map((g) => g.length + 1));
  const kw = Math.max(12, ...cols.map((c) => c.length + 2));
  console.log(`   ${"kernel group".padEnd(gw)}${pad("n", 5)}${cols.map((c) => pad(c, kw)).join("")}${cols.slice(1).map((c) => pad(c, kw)).join("")}`);
  for (const g of groups) {
    const v = summary.map((s) => s.kernels[g]?.microseconds);
    const n = summary.map((s) => s.kernels[g]?.dispatches).find((x) => x != null);
    const r = v.slice(1).map((x) => pad(x != null && v[0] ? `${(x / v[0]).toFixed(2)}x` : "-", kw));
    console.log(`   ${g.padEnd(gw)}${pad(n, 5)}${v.map((x) => pad(fmt(x), kw)).join("")}${r.join("")}`);
  }
}
for (const e of failed) console.log(`   FAILED ${e}`);

mkdirSync(out, { recursive: true });
const meta = { name, model: saved?.model ?? basename(model), file_bytes: file, bench, rounds, date: saved?.date ?? new Date().toISOString() };
writeFileSync(join(out, `cross-${name}.json`), JSON.stringify({ ...meta, summary, runs, failed }, null, 1));
writeFileSync(join(out, `cross-${name}.svg`), svg({ ...meta, summary, groups }));
console.log(`\n   wrote ${join(out, `cross-${name}.json`)} and ${join(out, `cross-${name}.svg`)} (${since()} s)`);
process.exit(summary.length === armNames.length && !failed.length ? 0 : 1);
