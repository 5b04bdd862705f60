// The chat page: picks a model (URL, file, cache, ?model=), streams answers from the engine that
// the npm package runs in a worker, and shows load progress, speed, the adapter and its features.
import { createEngine, listCachedModels, deleteCachedModel } from "../npm/dist/index.js";

const $ = (id) => document.getElementById(id);
const ui = {
  adapter: $("adapter"), error: $("error"), url: $("model-url"), urlForm: $("url-form"),
  drop: $("drop"), file: $("file"), cached: $("cached"), loadBox: $("load-box"),
  progress: $("progress"), loadStatus: $("load-status"), modelInfo: $("model-info"),
  transcript: $("transcript"), form: $("chat-form"), message: $("message"), send: $("send"),
  stop: $("stop"), reset: $("reset"), stats: $("stats"),
};

let engine = null;
let history = [];
// A base model (no chat template) continues text: the whole transcript is its prompt.
let baseText = null;
let generating = false;
let loading = false;
let abort = null;

const mib = (b) => `${(b / 1048576).toFixed(1)} MiB`;

function showError(e) {
  const code = e && e.code ? e.code : "error";
  const hints = {
    no_webgpu: "This browser has no WebGPU. Use a recent Chrome or Edge, Safari 26+, or Firefox with WebGPU enabled.",
    model_too_large: "This model cannot run on this GPU: ",
    unsupported_model: "This model is not supported: ",
    bad_gguf: "This is not a valid GGUF model: ",
    device_lost: "The GPU device was lost (the model may be too large for it): ",
    network: "The model could not be downloaded: ",
  };
  const hint = hints[code];
  ui.error.textContent = hint && hint.endsWith(": ") ? hint + e.message : hint || `${code}: ${e.message ?? e}`;
  ui.error.dataset.code = code;
  ui.error.hidden = false;
}

function clearError() {
  ui.error.hidden = true;
  ui.error.textContent = "";
}

function setChatEnabled(on) {
  ui.message.disabled = !on;
  ui.send.disabled = !on || generating;
  ui.reset.disabled = !on || generating;
  ui.stop.disabled = !generating;
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = `msg ${role}`;
  const label = document.createElement("span");
  label.className = "role";
  label.textContent = role;
  const body = document.createElement("span");
  body.className = "content";
  body.textContent = text;
  div.append(label, body);
  ui.transcript.append(div);
  ui.transcript.scrollTop = ui.transcript.scrollHeight;
  return body;
}

async function refreshCached() {
  const list = await listCachedModels().catch(() => []);
  ui.cached.replaceChildren();
  if (!list.length) {
    const li = document.createElement("li");
    li.className = "muted";
    li.textContent = "none yet";
    ui.cached.append(li);
  }
  for (const m of list) {
    const li = document.createElement("li");
    const name = decodeURIComponent(m.url.split("/").pop());
    li.textContent = `${name} (${mib(m.bytes)}) `;
    const load = document.createElement("button");
    load.textContent = "Load";
    load.onclick = () => load_(m.url);
    const del = document.createElement("button");
    del.textContent = "Delete";
    del.onclick = async () => { await deleteCachedModel(m.url); refreshCached(); };
    li.append(load, del);
    ui.cached.append(li);
  }
}

async function load_(source) {
  if (!engine || loading) return;
  clearError();
  loading = true;
  setChatEnabled(false);
  history = [];
  ui.transcript.replaceChildren();
  ui.loadBox.hidden = false;
  ui.progress.value = 0;
  const name = typeof source === "string" ? decodeURIComponent(source.split("/").pop()) : source.name;
  ui.loadStatus.textContent = `Loading ${name}…`;
  ui.modelInfo.textContent = "";
  const t0 = performance.now();
  try {
    const info = await engine.load(source, (p) => {
      ui.progress.value = p.fraction;
      if (p.phase === "header") ui.loadStatus.textContent = `${name}: ${p.architecture}, ${p.layers} layers, ${mib(p.weightBytes)} of weights`;
      if (p.phase === "tensors") ui.loadStatus.textContent = `${p.source === "cache" ? "from the cache" : p.source === "file" ? "from the file" : "downloading"}: ${mib(p.bytes)} / ${mib(p.totalBytes)}, tensors ${p.tensors}/${p.totalTensors}`;
      if (p.phase === "pipelines") ui.loadStatus.textContent = "compiling the kernels…";
    });
    const secs = (performance.now() - t0) / 1000;
    ui.loadStatus.textContent = `Loaded ${info.name} in ${secs.toFixed(1)} s`;
    ui.modelInfo.textContent = `${info.name}: ${info.architecture}, context ${info.context}, ${info.pipelines} pipelines, ${info.dispatchesPerToken} dispatches per token${info.mtp ? ", an MTP layer (multi-token prediction on)" : ""}${info.chatTemplate ? "" : ", no chat template (it continues your text)"}, from the ${info.source}; load ${secs.toFixed(1)} s`;
    baseText = info.chatTemplate ? null : "";
    ui.message.placeholder = info.chatTemplate ? "Ask something… (Enter sends, Shift+Enter for a new line)" : "Text for the model to continue… (Enter sends)";
    document.body.dataset.modelReady = "1";
    setChatEnabled(true);
    ui.message.focus();
  } catch (e) {
    ui.loadStatus.textContent = "Load failed.";
    showError(e);
  } finally {
    loading = false;
    refreshCached();
  }
}

async function send() {
  const text = ui.message.value.trim();
  if (!text || generating || !engine?.model) return;
  ui.message.value = "";
  history.push({ role: "user", content: text });
  addMessage("user", text);
  const out = addMessage("assistant", "");
  generating = true;
  setChatEnabled(true);
  abort = new AbortController();
  let answer = "";
  try {
    const stream = baseText === null
      ? await engine.chat.completions.create({ messages: history, stream: true, max_tokens: 512 }, { signal: abort.signal })
      : await engine.completions.create({ prompt: `${baseText}${baseText ? " " : ""}${text}`, stream: true, max_tokens: 256 }, { signal: abort.signal });
    for await (const chunk of stream) {
      const piece = chunk.choices[0]?.delta?.content ?? chunk.choices[0]?.text;
      if (piece) {
        answer += piece;
        out.textContent = answer;
        ui.transcript.scrollTop = ui.transcript.scrollHeight;
      }
      if (chunk.usage) {
        const x = chunk.usage.extra;
        const plain = x.plain_tokens ? `, ${x.plain_tokens} tokens by plain steps (faster here)` : "";
        const mtp = x.draft_tokens
          ? `; MTP: ${(100 * x.acceptance_rate).toFixed(0)}% of ${x.draft_tokens} drafts accepted, ${x.tokens_per_pass.toFixed(2)} tokens a pass${plain}`
          : x.plain_tokens ? "; MTP paused: plain steps measured faster here" : "";
        ui.stats.textContent = `prefill ${x.prefill_tokens_per_second.toPrecision(3)} tok/s (${x.prefilled_tokens} tokens), decode ${x.decode_tokens_per_second.toPrecision(3)} tok/s (${chunk.usage.completion_tokens} tokens)${mtp}`;
      }
    }
  } catch (e) {
    if (e.code !== "aborted") showError(e);
    else ui.stats.textContent = "stopped";
  } finally {
    history.push({ role: "assistant", content: answer.trim() });
    if (baseText !== null) baseText = `${baseText}${baseText ? " " : ""}${text}${answer}`;
    generating = false;
    setChatEnabled(!!engine?.model);
  }
}

ui.form.addEventListener("submit", (e) => { e.preventDefault(); send(); });
ui.message.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); }
});
ui.stop.addEventListener("click", () => abort?.abort());
ui.reset.addEventListener("click", () => { history = []; baseText = baseText === null ? null : ""; ui.transcript.replaceChildren(); ui.stats.textContent = ""; });
ui.urlForm.addEventListener("submit", (e) => { e.preventDefault(); if (ui.url.value) load_(ui.url.value); });
ui.file.addEventListener("change", () => ui.file.files[0] && load_(ui.file.files[0]));
ui.drop.addEventListener("dragover", (e) => { e.preventDefault(); ui.drop.classList.add("over"); });
ui.drop.addEventListener("dragleave", () => ui.drop.classList.remove("over"));
ui.drop.addEventListener("drop", (e) => {
  e.preventDefault();
  ui.drop.classList.remove("over");
  const f = e.dataTransfer.files[0];
  if (f) load_(f);
});

// The engine's adapter (in its worker) may have an empty description, as SwiftShader's has: name
// it from this thread's adapter info (vendor, architecture) instead.
async function adapterName() {
  const info = (await navigator.gpu.requestAdapter().catch(() => null))?.info;
  return [info?.vendor, info?.architecture, info?.device].filter(Boolean).join(" ") || "unnamed adapter";
}

async function main() {
  refreshCached();
  try {
    engine = await createEngine();
  } catch (e) {
    ui.adapter.textContent = "No GPU.";
    showError(e);
    return;
  }
  const a = engine.adapter;
  const on = (b) => (b ? "on" : "off");
  ui.adapter.textContent = `GPU: ${a.adapter || (await adapterName())} (${a.deviceType}); f16 ${on(a.features.f16)}, subgroups ${on(a.features.subgroups)}; max storage binding ${mib(a.limits.maxStorageBufferBindingSize)}`;
  ui.adapter.dataset.ready = "1";
  const model = new URLSearchParams(location.search).get("model");
  if (model) {
    ui.url.value = model;
    load_(model);
  }
}

main();
