// End to end in Debian's Chromium (headless, SwiftShader's WebGPU) driven by playwright-core:
// the chat page loads the default model from a local URL (?model=), "What is the capital of
// France?" is sent, and "Paris" appears in the transcript, streamed (several intermediate states).
// Also measures load time and speed, and saves a screenshot (TANDEM_SCREENSHOT, default
// /tmp/tandem-page.png). Then the MTP demo model (a base model): the page continues a text and
// shows the drafts' acceptance. Run after `npm --prefix web run build`: node web/tests/e2e.mjs
import assert from "node:assert/strict";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { serve, DEFAULT_MODEL } from "./serve.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const { server, url } = await serve(root);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--enable-unsafe-webgpu", "--no-sandbox", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
let ok = false;
try {
  const page = await browser.newPage({ viewport: { width: 1000, height: 900 } });
  page.on("console", (m) => m.type() === "error" && console.log(`page: ${m.text()}`));
  page.on("pageerror", (e) => console.log(`page error: ${e.message}`));
  const t0 = Date.now();
  await page.goto(`${url}/index.html?model=${encodeURIComponent(`${url}/models/${DEFAULT_MODEL}`)}`);
  await page.waitForSelector("#adapter[data-ready]", { timeout: 60_000 });
  console.log(await page.textContent("#adapter"));
  await page.waitForFunction(() => document.body.dataset.modelReady || !document.getElementById("error").hidden, null, { timeout: 300_000 });
  const err = await page.$eval("#error", (e) => (e.hidden ? "" : e.textContent));
  assert.equal(err, "", "no error on the page");
  const loadSeconds = (Date.now() - t0) / 1000;
  console.log(`${await page.textContent("#model-info")}`);
  console.log(`page load to model ready: ${loadSeconds.toFixed(1)} s`);

  const box = page.getByRole("textbox", { name: "Message" });
  await box.fill("What is the capital of France?");
  // Record every distinct state of the assistant's message while it streams.
  await page.evaluate(() => {
    window.__states = [];
    const log = document.querySelector('[role="log"]');
    new MutationObserver(() => {
      const a = log.querySelectorAll(".msg.assistant .content");
      const t = a.length ? a[a.length - 1].textContent : "";
      if (t && window.__states.at(-1) !== t) window.__states.push(t);
    }).observe(log, { subtree: true, childList: true, characterData: true });
  });
  const tSend = Date.now();
  await page.getByRole("button", { name: "Send" }).click();
  await page.waitForFunction(() => /Paris/.test(document.querySelector('[role="log"]').textContent), null, { timeout: 300_000 });
  await page.waitForFunction(() => !document.getElementById("send").disabled, null, { timeout: 300_000 });
  const states = await page.evaluate(() => window.__states);
  const transcript = await page.textContent('[role="log"]');
  const stats = await page.textContent("#stats");
  console.log(`answer: ${JSON.stringify(states.at(-1))}`);
  console.log(`streamed through ${states.length} states in ${((Date.now() - tSend) / 1000).toFixed(1)} s; ${stats}`);
  assert.match(transcript, /Paris/);
  assert.ok(states.length >= 3, `at least 2 intermediate transcript states before the final one (got ${states.length})`);
  if (process.env.TANDEM_MEASURE) {
    // A second turn: the kernels are compiled by now (SwiftShader compiles at first dispatch), so
    // its figures are the steady-state speed.
    const t1 = Date.now();
    await box.fill("And what is the capital of Germany?");
    await page.getByRole("button", { name: "Send" }).click();
    await page.waitForFunction(() => document.querySelectorAll(".msg.assistant").length === 2 && !document.getElementById("send").disabled, null, { timeout: 600_000 });
    console.log(`second turn (${((Date.now() - t1) / 1000).toFixed(1)} s): ${await page.textContent("#stats")}`);
    console.log(`answer: ${JSON.stringify(await page.$$eval(".msg.assistant .content", (a) => a.at(-1).textContent))}`);
  }
  const shot = process.env.TANDEM_SCREENSHOT || "/tmp/tandem-page.png";
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`screenshot: ${shot}`);

  // The MTP demo model: a base model with an MTP layer, so the page continues the text and shows
  // what multi-token prediction did.
  await page.goto(`${url}/index.html?model=${encodeURIComponent(`${url}/tests/fixtures/glm4moe-mtp-demo-q8_0.gguf`)}`);
  await page.waitForFunction(() => document.body.dataset.modelReady || !document.getElementById("error").hidden, null, { timeout: 300_000 });
  assert.equal(await page.$eval("#error", (e) => (e.hidden ? "" : e.textContent)), "", "no error on the page");
  const info = await page.textContent("#model-info");
  assert.match(info, /MTP layer/);
  assert.match(info, /no chat template/);
  await box.fill("The president said that the nation");
  await page.getByRole("button", { name: "Send" }).click();
  await page.waitForFunction(() => /MTP: \d+% of \d+ drafts accepted/.test(document.getElementById("stats").textContent), null, { timeout: 300_000 });
  const continued = await page.$$eval(".msg.assistant .content", (a) => a.at(-1).textContent);
  assert.ok(continued.trim().length > 0, "the model continued the text");
  console.log(`MTP demo: ${JSON.stringify(continued.slice(0, 80))}; ${await page.textContent("#stats")}`);
  ok = true;
} finally {
  await browser.close();
  server.close();
}
console.log(ok ? "e2e: passed" : "e2e: FAILED");
process.exit(ok ? 0 : 1);
