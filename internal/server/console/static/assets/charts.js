// Charts drawn as inline SVG, with their numbers in text too (a chart is
// never the only way to read a figure).
import { h } from "./ui.js";

const NS = "http://www.w3.org/2000/svg";
function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v != null) el.setAttribute(k, String(v));
  for (const c of children.flat()) if (c != null) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// barChart: horizontal bars with the label and the value written beside
// each bar.
export function barChart(items, title) {
  const max = Math.max(1, ...items.map((i) => i.value));
  const rowH = 24, labelW = 170, barW = 120, W = labelW + barW + 70;
  const svg = s("svg", { viewBox: `0 0 ${W} ${items.length * rowH + 4}`, role: "img", "aria-label": title + ": " + items.map((i) => `${i.label} ${i.value}`).join(", "), class: "chart bar" });
  items.forEach((it, n) => {
    const y = n * rowH + 2;
    const w = Math.max(it.value ? 2 : 0, Math.round((it.value / max) * barW));
    svg.append(
      s("text", { x: labelW - 6, y: y + 16, "text-anchor": "end", class: "lbl" }, it.label),
      s("rect", { x: labelW, y: y + 4, width: barW, height: rowH - 8, class: "track" }),
      s("rect", { x: labelW, y: y + 4, width: w, height: rowH - 8, class: "bar " + (it.cls || "") }),
      s("text", { x: labelW + barW + 6, y: y + 16, class: "num" }, it.value.toLocaleString("en")));
  });
  return h("figure", { class: "figure" }, svg);
}

// stackedTimeChart buckets changes by their time and stacks, per bucket,
// the keys keyOf(change) returns (a key, a list of keys, or null).
export function stackedTimeChart(changes, keyOf, series, title) {
  const times = changes.map((c) => new Date(c.at).getTime()).filter((t) => !isNaN(t));
  const t0 = Math.min(...times), t1 = Math.max(...times);
  const N = 24;
  const span = Math.max(1, t1 - t0);
  const buckets = Array.from({ length: N }, () => ({}));
  for (const c of changes) {
    const t = new Date(c.at).getTime();
    if (isNaN(t)) continue;
    const b = Math.min(N - 1, Math.floor(((t - t0) / span) * N));
    let ks = keyOf(c);
    if (ks == null) continue;
    if (!Array.isArray(ks)) ks = [ks];
    for (const k of ks) buckets[b][k] = (buckets[b][k] || 0) + 1;
  }
  const totals = buckets.map((b) => Object.values(b).reduce((x, y) => x + y, 0));
  const max = Math.max(1, ...totals);
  const W = 720, H = 200, L = 44, B = 28, bw = (W - L - 8) / N;
  const svg = s("svg", { viewBox: `0 0 ${W} ${H + 8}`, role: "img", class: "chart time", "aria-label": title });
  const ticks = [...new Set([0, Math.round(max / 2), max])];
  for (const v of ticks) {
    const y = H - B - (v / max) * (H - B - 8);
    svg.append(s("line", { x1: L, x2: W - 4, y1: y, y2: y, class: "grid" }), s("text", { x: L - 6, y: y + 4, "text-anchor": "end", class: "num" }, v));
  }
  buckets.forEach((b, i) => {
    let y = H - B;
    const x = L + i * bw + 1;
    for (const se of series) {
      const v = b[se.key] || 0;
      if (!v) continue;
      const hgt = (v / max) * (H - B - 8);
      y -= hgt;
      svg.append(s("rect", { x, y, width: Math.max(1, bw - 2), height: hgt, class: "bar " + se.cls }, s("title", {}, `${se.key}: ${v}`)));
    }
  });
  // Seconds when the window is shorter than an hour, else minutes.
  const fmt = (t) => new Date(t).toISOString().replace("T", " ").slice(0, span < 3600e3 ? 19 : 16) + "Z";
  svg.append(s("text", { x: L, y: H - 8, class: "num" }, fmt(t0)), s("text", { x: W - 4, y: H - 8, "text-anchor": "end", class: "num" }, fmt(t1)));
  // The legend and totals in words.
  const sums = {};
  for (const b of buckets) for (const [k, v] of Object.entries(b)) sums[k] = (sums[k] || 0) + v;
  const legend = h("ul", { class: "legend" }, ...series.filter((se) => sums[se.key]).map((se) =>
    h("li", {}, h("span", { class: "swatch " + se.cls, "aria-hidden": "true" }), `${se.key.replaceAll("_", " ")}: ${sums[se.key]}`)));
  return h("figure", { class: "figure" }, h("figcaption", {}, title), svg, legend);
}
