// The comparison's plot as a standalone SVG (no plotting dependency): decode and prefill tok/s
// per arm (bar: median, whisker: min-max), then GPU µs of one decode step per kernel group, one
// bar per arm, with each arm's ratio to native.
const COLORS = { native: "#1f5fa8", browser: "#e0731a", "native-portable": "#6aa5e0", "browser-portable": "#f2b36f" };
const color = (arm) => COLORS[arm] ?? "#888";
const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const num = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

/** `meta`: name, file_bytes, bench, rounds, date; `summary`: compare.mjs's per-arm summaries; `groups`: kernel groups in display order. */
export function svg({ name, file_bytes, bench, rounds, date, summary, groups }) {
  const W = 980;
  const parts = [];
  const text = (x, y, s, a = {}) =>
    parts.push(`<text x="${x}" y="${y}"${Object.entries(a).map(([k, v]) => ` ${k}="${v}"`).join("")}>${esc(s)}</text>`);
  const rect = (x, y, w, h, fill, title) =>
    parts.push(`<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${Math.max(0, w).toFixed(1)}" height="${h.toFixed(1)}" fill="${fill}">${title ? `<title>${esc(title)}</title>` : ""}</rect>`);
  const line = (x1, y1, x2, y2, stroke = "#333", width = 1) =>
    parts.push(`<line x1="${x1.toFixed(1)}" y1="${y1.toFixed(1)}" x2="${x2.toFixed(1)}" y2="${y2.toFixed(1)}" stroke="${stroke}" stroke-width="${width}"/>`);

  text(20, 28, `${name}: native vs browser engine, same GPU, same GGUF, same kernels`, { "font-size": 18, "font-weight": "bold" });
  text(20, 48, `${(file_bytes / 1e9).toFixed(2)} GB; ${bench.prompts} prompts x ${bench.prompt} tokens, ${bench.gen} generated; ${rounds} rounds interleaved A B B A; ${date.slice(0, 10)}`, { "font-size": 12, fill: "#444" });
  let y = 66;
  for (const s of summary) {
    rect(20, y - 9, 10, 10, color(s.arm));
    text(36, y, `${s.arm}: ${s.adapter}`, { "font-size": 11, fill: "#333" });
    y += 15;
  }

  // Speeds: two small bar charts.
  const top = y + 20;
  const H = 170;
  const base = summary.find((s) => s.arm === "native");
  [["decode", "decode tok/s"], ["prefill", "prefill tok/s"]].forEach(([k, title], i) => {
    const x0 = 70 + i * 470;
    const max = Math.max(...summary.map((s) => s[k].max)) * 1.1;
    text(x0, top, title, { "font-size": 14, "font-weight": "bold" });
    line(x0, top + 15 + H, x0 + 400, top + 15 + H);
    const bw = Math.min(80, 380 / summary.length - 20);
    summary.forEach((s, j) => {
      const x = x0 + 15 + j * (bw + 20);
      const h = (v) => (v / max) * H;
      const yb = top + 15 + H;
      rect(x, yb - h(s[k].median), bw, h(s[k].median), color(s.arm), `${s.arm}: median ${s[k].median.toFixed(1)}, min ${s[k].min.toFixed(1)}, max ${s[k].max.toFixed(1)}`);
      line(x + bw / 2, yb - h(s[k].min), x + bw / 2, yb - h(s[k].max), "#111", 1.5);
      line(x + bw / 2 - 6, yb - h(s[k].max), x + bw / 2 + 6, yb - h(s[k].max), "#111", 1.5);
      line(x + bw / 2 - 6, yb - h(s[k].min), x + bw / 2 + 6, yb - h(s[k].min), "#111", 1.5);
      text(x + bw / 2, yb - h(s[k].max) - 5, num(s[k].median), { "font-size": 12, "text-anchor": "middle", "font-weight": "bold" });
      text(x + bw / 2, yb + 14, s.arm, { "font-size": 11, "text-anchor": "middle" });
      if (base && s !== base) text(x + bw / 2, yb + 28, `${(s[k].median / base[k].median).toFixed(2)}x native`, { "font-size": 11, "text-anchor": "middle", fill: "#444" });
    });
  });

  // Kernels: one row per group, one bar per arm.
  let ky = top + H + 80;
  const rows = groups.filter((g) => summary.some((s) => s.kernels[g]));
  if (rows.length) {
    text(20, ky, "GPU µs per kernel group in one decode step (timestamp queries; median of the runs)", { "font-size": 14, "font-weight": "bold" });
    ky += 10;
    const labelW = 230;
    const ratioW = 70 * Math.max(1, summary.length - 1);
    const plotW = W - labelW - ratioW - 40;
    const max = Math.max(...rows.flatMap((g) => summary.map((s) => s.kernels[g]?.microseconds ?? 0)), 1e-9);
    const bh = 8;
    for (let t = 0; t <= 4; t++) {
      const x = labelW + 20 + (t / 4) * plotW;
      text(x, ky + 10, `${num((t / 4) * max)} µs`, { "font-size": 10, "text-anchor": "middle", fill: "#666" });
    }
    ky += 16;
    const rowH = summary.length * bh + 8;
    for (const g of rows) {
      const n = summary.map((s) => s.kernels[g]?.dispatches).find((x) => x != null);
      text(labelW + 12, ky + rowH / 2 + 2, `${g} (${n})`, { "font-size": 11, "text-anchor": "end" });
      summary.forEach((s, j) => {
        const v = s.kernels[g]?.microseconds;
        if (v != null) rect(labelW + 20, ky + j * bh, (v / max) * plotW, bh - 1, color(s.arm), `${s.arm} ${g}: ${v.toFixed(1)} µs`);
      });
      const b = base?.kernels[g]?.microseconds;
      summary.filter((s) => s !== base).forEach((s, j) => {
        const v = s.kernels[g]?.microseconds;
        const r = v != null && b ? v / b : null;
        const fill = r == null ? "#666" : r > 1.05 ? "#b22" : r < 0.95 ? "#272" : "#333";
        text(W - ratioW - 10 + j * 70 + 60, ky + rowH / 2 + 2, r == null ? "-" : `${r.toFixed(2)}x`, { "font-size": 11, "text-anchor": "end", fill, "font-weight": "bold" });
      });
      line(labelW + 20, ky + rowH - 3, labelW + 20 + plotW, ky + rowH - 3, "#eee");
      ky += rowH;
    }
    const total = (s) => Object.values(s.kernels).reduce((a, k) => a + k.microseconds, 0);
    ky += 14;
    text(20, ky, `sum of one decode step: ${summary.map((s) => `${s.arm} ${total(s).toFixed(0)} µs`).join(", ")}; ratios are arm µs / native µs (red: slower by more than 5%)`, { "font-size": 11, fill: "#444" });
    summary.filter((s) => s !== base).forEach((s, j) => text(W - ratioW - 10 + j * 70 + 60, top + H + 90, s.arm.replace("-portable", "-p"), { "font-size": 10, "text-anchor": "end", fill: "#444" }));
  }
  const height = ky + 20;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" font-family="sans-serif">\n<rect width="${W}" height="${height}" fill="white"/>\n${parts.join("\n")}\n</svg>\n`;
}
