// A static file server for the browser tests: the repository root at /, and the model cache at
// /models/ (with Content-Length and Range-free streaming), on 127.0.0.1 and a free port.
import { createServer } from "node:http";
import { createReadStream, statSync } from "node:fs";
import { extname, join, normalize, resolve } from "node:path";
import { homedir } from "node:os";

const types = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".mjs": "text/javascript",
  ".css": "text/css", ".wasm": "application/wasm", ".json": "application/json", ".map": "application/json",
};

export const modelDir = () => process.env.TANDEM_MODEL_DIR || join(homedir(), ".cache/tandem/models");
export const DEFAULT_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf";

export function serve(root, models = modelDir()) {
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
    const [base, rel] = path.startsWith("/models/") ? [models, path.slice(8)] : [root, path.slice(1)];
    const file = resolve(base, normalize(rel || "index.html"));
    let st;
    try {
      if (!file.startsWith(resolve(base))) throw new Error("outside");
      st = statSync(file);
      if (!st.isFile()) throw new Error("not a file");
    } catch {
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("not found");
      return;
    }
    res.writeHead(200, {
      "content-type": types[extname(file)] || "application/octet-stream",
      "content-length": st.size,
      "cache-control": "no-store",
    });
    // 1 MiB reads: a multi-GB model in 64 KiB pieces spends its time on per-chunk overhead.
    createReadStream(file, { highWaterMark: 1 << 20 }).pipe(res);
  });
  return new Promise((ok) => server.listen(0, "127.0.0.1", () => ok({ server, url: `http://127.0.0.1:${server.address().port}` })));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const root = resolve(process.argv[2] || ".");
  const { url } = await serve(root);
  console.log(`serving ${root} at ${url}/ and ${modelDir()} at ${url}/models/`);
}
