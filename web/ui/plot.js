// Small SVG charts for the KV-cache views, drawn by hand (no library): a line chart with
// optional log-scaled y, reference lines and per-point markers. Every chart is an
// <svg role="img"> with a one-sentence label; each view also offers its numbers as a table.
// Charts are drawn at the container's real width, so the text stays readable on a phone.

const SVG = "http://www.w3.org/2000/svg";

export function svg(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text != null) node.textContent = text;
  return node;
}

const SUPERSCRIPT = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };

/** 10^k in print: 10⁻⁹. */
export function pow10(k) {
  return `10${String(k).split("").map((c) => SUPERSCRIPT[c]).join("")}`;
}

/** A verdict line: a bold headline ("✓ Passed") and the sentence after it. */
export function verdict(node, good, headline, rest) {
  const strong = document.createElement("strong");
  strong.textContent = `${good ? "✓" : "✕"} ${headline}`;
  node.replaceChildren(strong, ` ${rest}`);
  node.className = `kv-verdict ${good ? "is-good" : "is-bad"}`;
}

/** A small or large number as a learner reads it: 4.4 × 10⁻¹⁵, 0.031, 2.7. */
export function sci(x) {
  if (x == null || Number.isNaN(x)) return "–";
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (a >= 0.01 && a < 1000) return String(Number(x.toPrecision(2)));
  let k = Math.floor(Math.log10(a));
  let m = Number((x / 10 ** k).toPrecision(2));
  if (Math.abs(m) >= 10) {
    m /= 10;
    k += 1;
  }
  return m === 1 ? pow10(k) : `${m} × ${pow10(k)}`;
}

function niceTicks(lo, hi, count, integer = false) {
  const span = hi - lo || 1;
  const raw = span / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const factors = integer ? [1, 2, 5, 10] : [1, 2, 2.5, 5, 10];
  let step = factors.map((f) => f * mag).find((s) => span / s <= count) || 10 * mag;
  if (integer) step = Math.max(1, Math.round(step));
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

/**
 * A line chart. spec: {
 *   label: one sentence for screen readers,
 *   x: {min, max, title, format}, y: {min, max, title, format, log},
 *   series: [{points: [[x, y]], className, marker: "dot" | "none", label}],
 *   marks: [{x, y, className, shape: "cross" | "dot", title}]   extra markers,
 *   hlines: [{y, className, label}], vlines: [{x, className, label}],
 *   height }
 * width: the pixel width to draw at.
 */
export function lineChart(spec, width) {
  const W = Math.max(260, Math.round(width));
  const H = spec.height || 230;
  const narrow = W < 420;
  const pad = { left: narrow ? 46 : 58, right: 14, top: 16, bottom: 40 };
  const log = Boolean(spec.y.log);
  const ty = (v) => (log ? Math.log10(Math.max(v, 10 ** spec.y.min)) : v);
  const yLo = spec.y.min;
  const yHi = spec.y.max;
  const X = (v) => pad.left + ((v - spec.x.min) / (spec.x.max - spec.x.min || 1)) * (W - pad.left - pad.right);
  const Y = (v) => pad.top + (1 - (ty(v) - yLo) / (yHi - yLo || 1)) * (H - pad.top - pad.bottom);
  const chart = svg("svg", {
    viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": spec.label, class: "kv-svg",
  });

  // grid and y axis
  const yTicks = log
    ? Array.from({ length: yHi - yLo + 1 }, (_, i) => yLo + i).filter((k) => (yHi - yLo > 8 ? k % 3 === 0 : true))
    : niceTicks(yLo, yHi, 4);
  for (const t of yTicks) {
    const v = log ? 10 ** t : t;
    const yy = Y(v);
    chart.append(svg("line", { x1: pad.left, x2: W - pad.right, y1: yy, y2: yy, class: "kv-grid" }));
    chart.append(svg("text", { x: pad.left - 6, y: yy + 4, "text-anchor": "end", class: "kv-axis" },
      log ? pow10(t) : (spec.y.format || String)(v)));
  }
  // x axis
  const xTicks = niceTicks(spec.x.min, spec.x.max, narrow ? 4 : 7, Boolean(spec.x.integer));
  chart.append(svg("line", { x1: pad.left, x2: W - pad.right, y1: H - pad.bottom, y2: H - pad.bottom, class: "kv-base" }));
  for (const t of xTicks) {
    chart.append(svg("text", { x: X(t), y: H - pad.bottom + 15, "text-anchor": "middle", class: "kv-axis" },
      (spec.x.format || String)(t)));
  }
  chart.append(svg("text", { x: pad.left + (W - pad.left - pad.right) / 2, y: H - 5, "text-anchor": "middle", class: "kv-axis-title" }, spec.x.title));
  const yTitle = svg("text", { x: 12, y: pad.top + (H - pad.top - pad.bottom) / 2, "text-anchor": "middle", class: "kv-axis-title", transform: `rotate(-90 12 ${pad.top + (H - pad.top - pad.bottom) / 2})` }, spec.y.title);
  chart.append(yTitle);

  for (const line of spec.vlines || []) {
    const xx = X(line.x);
    chart.append(svg("line", { x1: xx, x2: xx, y1: pad.top, y2: H - pad.bottom, class: `kv-vline ${line.className || ""}` }));
    if (line.label) chart.append(svg("text", { x: xx + 3, y: pad.top + 9, class: "kv-note" }, line.label));
  }
  for (const line of spec.hlines || []) {
    const yy = Y(line.y);
    chart.append(svg("line", { x1: pad.left, x2: W - pad.right, y1: yy, y2: yy, class: `kv-hline ${line.className || ""}` }));
    if (line.label) chart.append(svg("text", { x: W - pad.right - 2, y: yy - 5, "text-anchor": "end", class: `kv-note ${line.className || ""}` }, line.label));
  }
  for (const s of spec.series) {
    if (!s.points.length) continue;
    const g = svg("g", { class: `kv-series ${s.className || ""}` });
    g.append(svg("polyline", { points: s.points.map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(" "), class: "kv-line" }));
    if (s.marker !== "none") {
      for (const [x, y] of s.points) g.append(svg("circle", { cx: X(x), cy: Y(y), r: 3.2, class: "kv-dot" }));
    }
    if (s.label) {
      const [lx, ly] = s.points[s.points.length - 1];
      g.append(svg("text", { x: X(lx) - 4, y: Y(ly) + (s.labelDy ?? -8), "text-anchor": "end", class: "kv-series-label" }, s.label));
    }
    chart.append(g);
  }
  for (const m of spec.marks || []) {
    const xx = X(m.x);
    const yy = Y(m.y);
    const g = svg("g", { class: `kv-mark ${m.className || ""}` });
    if (m.shape === "cross") {
      g.append(svg("path", { d: `M${xx - 4},${yy - 4}L${xx + 4},${yy + 4}M${xx - 4},${yy + 4}L${xx + 4},${yy - 4}` }));
    } else {
      g.append(svg("circle", { cx: xx, cy: yy, r: 3.2 }));
    }
    if (m.title) g.append(svg("title", {}, m.title));
    chart.append(g);
  }
  return chart;
}

/** Draw `make(width)` into `box` now and again whenever the box changes width. */
export function drawResponsive(box, make) {
  let last = 0;
  const draw = () => {
    const width = box.clientWidth;
    if (!width || Math.abs(width - last) < 8) return;
    last = width;
    box.replaceChildren(make(width));
  };
  if (box._kvObserver) box._kvObserver.disconnect();
  box._kvObserver = new ResizeObserver(draw);
  box._kvObserver.observe(box);
  last = 0;
  draw();
  if (!box.clientWidth) box.replaceChildren(make(600)); // hidden now: drawn again when shown
}
