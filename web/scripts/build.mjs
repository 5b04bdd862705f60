// Builds what the npm package and the chat page need:
//   1. the web crate for wasm32 (cargo, release),
//   2. its JS bindings (wasm-bindgen --target web, the version in Cargo.lock) into npm/wasm/,
//   3. the package (esbuild: npm/dist/index.js, worker.js, the .wasm beside them; tsc: .d.ts).
// Run from anywhere: `npm --prefix web run build`. TANDEM_SKIP_CARGO=1 reuses the last wasm.
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const web = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const root = resolve(web, "..");
const npm = join(web, "npm");
const run = (cmd, args, opts = {}) => {
  console.log(`> ${cmd} ${args.join(" ")}`);
  execFileSync(cmd, args, { stdio: "inherit", cwd: root, ...opts });
};

const target = process.env.CARGO_TARGET_DIR ? resolve(process.env.CARGO_TARGET_DIR) : join(root, "target");
const wasmIn = join(target, "wasm32-unknown-unknown", "release", "tandem_web.wasm");
if (!process.env.TANDEM_SKIP_CARGO) {
  run("cargo", ["build", "--release", "-p", "tandem-web", "--target", "wasm32-unknown-unknown"]);
}

// wasm-bindgen must match the crate version in Cargo.lock exactly.
const lock = readFileSync(join(root, "Cargo.lock"), "utf8");
const want = /name = "wasm-bindgen"\nversion = "([^"]+)"/.exec(lock)[1];
let have = "";
try {
  have = execFileSync("wasm-bindgen", ["--version"], { encoding: "utf8" }).trim().split(" ")[1];
} catch {}
if (have !== want) {
  console.error(`wasm-bindgen ${want} is needed (found ${have || "none"}): cargo install wasm-bindgen-cli --version ${want}`);
  process.exit(1);
}
const wasmDir = join(npm, "wasm");
rmSync(wasmDir, { recursive: true, force: true });
run("wasm-bindgen", ["--target", "web", "--out-dir", wasmDir, "--out-name", "tandem_web", wasmIn]);

// Optional: the npm binaryen's wasm-opt (Debian's breaks the module), when installed.
const opt = join(web, "node_modules", ".bin", "wasm-opt");
if (existsSync(opt) && !process.env.TANDEM_NO_WASM_OPT) {
  run(opt, ["-O3", "--enable-bulk-memory", "--enable-nontrapping-float-to-int", "--enable-sign-ext", "--enable-mutable-globals",
    join(wasmDir, "tandem_web_bg.wasm"), "-o", join(wasmDir, "tandem_web_bg.wasm")]);
}

const dist = join(npm, "dist");
rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });
await esbuild.build({
  entryPoints: [join(npm, "src", "index.ts"), join(npm, "src", "worker.ts")],
  outdir: dist,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "neutral",
  target: "es2022",
  external: ["node:*"],
  sourcemap: true,
  logLevel: "info",
});
copyFileSync(join(wasmDir, "tandem_web_bg.wasm"), join(dist, "tandem_web_bg.wasm"));
run(join(web, "node_modules", ".bin", "tsc"), ["-p", join(npm, "tsconfig.json")]);
console.log(`built ${dist}`);
