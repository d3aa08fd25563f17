// The temperature experiment: the settings from the form, run at several temperatures with the
// same seeds, measured (decodelab.lesson.experiment), and shown as sample texts, a chart and a
// table with the same numbers. Python runs a batch of samples per request, so progress shows and
// the run can be cancelled between batches.

import { runningStatus } from "./planned.js";
import { svg } from "../ui/plot.js";
import { el, fieldError, fixed, pct, plural, readable, tableHead } from "../ui/render.js";
import { onScreen } from "../embed/presence.js";
import { $ } from "../ui/dom.js";

const BATCH_MS = 80;
const SHARES = new Set(["known_share", "new_share"]);

function minus(text) {
  return text.replace(/^-/, "−");
}

/** A measure's value as the table and chart show it. */
export function show(key, x) {
  if (x == null || !Number.isFinite(x)) return "–";
  if (SHARES.has(key)) return pct(x);
  return minus(fixed(x, 2));
}

function tLabel(row) {
  return row.greedy ? "T = 0 (greedy)" : `T = ${Number(row.temperature)}`;
}

function shortT(row) {
  return row.greedy ? "0" : String(Number(row.temperature));
}

// --- the chart ------------------------------------------------------------------------------------

const W = 240;
const H = 132;
const PAD = { left: 40, right: 14, top: 14, bottom: 26 };

function yRange(measure, rows) {
  if (measure.lo != null) return [measure.lo, measure.hi];
  // mean log-prob: from a round number below the lowest (mean - spread) up to 0
  let low = 0;
  for (const row of rows) {
    const m = row.measures[measure.key];
    if (m.mean != null) low = Math.min(low, m.mean - (m.sd || 0), m.min ?? m.mean);
  }
  return [Math.floor(low - 0.01), 0];
}

function panel(measure, rows, mode) {
  const box = el("div", "xp-panel");
  box.append(el("p", "xp-panel-title", measure.label));
  const [lo, hi] = yRange(measure, rows);
  const y = (v) => PAD.top + (1 - (v - lo) / (hi - lo || 1)) * (H - PAD.top - PAD.bottom);
  const step = (W - PAD.left - PAD.right) / rows.length;
  const x = (i) => PAD.left + step * (i + 0.5);
  const words = rows.map((row) => `${tLabel(row)}: ${show(measure.key, row.measures[measure.key].mean)}`).join("; ");
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${measure.label}. ${words}.`, class: "xp-svg" });
  for (const v of [lo, (lo + hi) / 2, hi]) {
    chart.append(svg("line", { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), class: "xp-grid" }));
    chart.append(svg("text", { x: PAD.left - 6, y: y(v) + 4, class: "xp-axis", "text-anchor": "end" },
      SHARES.has(measure.key) ? `${Math.round(v * 100)}%` : minus(String(Math.round(v * 100) / 100))));
  }
  rows.forEach((row, i) => {
    const m = row.measures[measure.key];
    chart.append(svg("text", { x: x(i), y: H - 8, class: "xp-axis", "text-anchor": "middle" }, `T ${shortT(row)}`));
    if (m.mean == null) {
      chart.append(svg("text", { x: x(i), y: y((lo + hi) / 2), class: "xp-axis", "text-anchor": "middle" }, "n/a"));
      return;
    }
    const g = svg("g", { class: `xp-t${i % 6}` });
    if (mode === "repeated" && m.sd > 0) {
      const top = y(Math.min(hi, m.mean + m.sd));
      const bottom = y(Math.max(lo, m.mean - m.sd));
      g.append(svg("line", { x1: x(i), x2: x(i), y1: top, y2: bottom, class: "xp-whisker" }));
      g.append(svg("line", { x1: x(i) - 6, x2: x(i) + 6, y1: top, y2: top, class: "xp-whisker" }));
      g.append(svg("line", { x1: x(i) - 6, x2: x(i) + 6, y1: bottom, y2: bottom, class: "xp-whisker" }));
    }
    g.append(svg("circle", { cx: x(i), cy: y(m.mean), r: 5, class: "xp-dot" }));
    g.append(svg("text", { x: x(i) + 9, y: y(m.mean) - 6, class: "xp-value" }, show(measure.key, m.mean)));
    chart.append(g);
  });
  box.append(chart);
  return box;
}

// --- the table ------------------------------------------------------------------------------------

function cellText(key, m, mode) {
  if (m.mean == null) return key === "spread" ? "too few tokens" : "–";
  if (mode !== "repeated" || m.sd == null) return show(key, m.mean); // pooled: one number
  return `${show(key, m.mean)} ± ${SHARES.has(key) ? pct(m.sd) : fixed(m.sd, 2)}`;
}

function table(result) {
  const { rows, measures, mode } = result;
  const t = el("table", "data-table xp-table");
  t.append(el("caption", null, mode === "repeated"
    ? `Mean ± spread (standard deviation) over ${plural(result.samples, "sample", "samples")} per temperature`
    : "One sample per temperature, same seed"));
  const thead = tableHead(["Measure", ...rows.map(tLabel)]);
  const tbody = el("tbody");
  const addRow = (label, note, cells) => {
    const tr = el("tr");
    const th = el("th");
    th.scope = "row";
    th.append(el("span", "xp-measure", label));
    if (note) th.append(el("span", "xp-means", note));
    tr.append(th, ...cells.map((c) => el("td", null, c)));
    tbody.append(tr);
  };
  for (const m of measures) {
    addRow(m.label, m.means, rows.map((row) => cellText(m.key, row.measures[m.key], mode)));
  }
  if (mode === "repeated") {
    addRow("Different texts", "samples unlike each other", rows.map((row) => `${row.distinct_texts} of ${row.samples}`));
  }
  addRow("Tokens", "generated per sample", rows.map((row) => (mode === "repeated"
    ? `${fixed(row.tokens.mean, 1)} ± ${fixed(row.tokens.sd, 1)}`
    : String(row.tokens.mean ?? 0))));
  addRow("Ended by", "end-of-sequence, stop string or budget", rows.map((row) => endings(row.finish)));
  t.append(thead, tbody);
  return t;
}

function endings(finish) {
  const words = { stop: "stop", length: "budget", cancelled: "cancelled" };
  return Object.entries(finish).map(([k, n]) => `${words[k] || k} ${n}`).join(", ");
}

// --- the samples ------------------------------------------------------------------------------------

function samples(result, prompt) {
  const grid = el("div", "xp-samples");
  result.rows.forEach((row, i) => {
    const card = el("article", `xp-sample xp-t${i % 6}`);
    const head = el("h3", "xp-sample-title");
    head.append(el("span", "xp-swatch"), tLabel(row));
    card.append(head);
    const list = el("ul", "xp-texts");
    for (const text of row.texts) {
      const li = el("li");
      if (prompt) li.append(el("span", "xp-prompt", prompt));
      li.append(text ? el("span", null, text) : el("span", "xp-empty", "(nothing: it ended at once)"));
      list.append(li);
    }
    card.append(list);
    if (result.mode === "repeated") card.append(el("p", "xp-more", `First ${row.texts.length} of ${row.samples} samples.`));
    grid.append(card);
  });
  return grid;
}

// What the numbers say: the findings Python wrote from them (metrics.findings), one sentence each.
function takeaway(result) {
  return result.findings.map((f) => f.text).join(" ");
}

// --- the controller ----------------------------------------------------------------------------------

export function createExperiment({ call, collect }) {
  const section = $("experiment");
  const form = $("xp-form");
  const temps = $("xp-temps");
  const samplesInput = $("xp-samples");
  const samplesField = $("xp-samples-field");
  const run = $("xp-run");
  const cancel = $("xp-cancel");
  const progress = $("xp-progress");
  const status = $("xp-status");
  const results = $("xp-results");
  const modeRadios = [...form.querySelectorAll("input[name=xp-mode]")];
  let running = false;
  let cancelled = false;

  const mode = () => (modeRadios.find((r) => r.checked) || modeRadios[0]).value;

  function syncMode() {
    samplesField.classList.toggle("not-applying", mode() !== "repeated");
    samplesInput.disabled = !ready || mode() !== "repeated";
  }
  let ready = false;
  for (const r of modeRadios) r.addEventListener("change", syncMode);

  function showError(control, message) {
    fieldError(control, message);
    control.setAttribute("aria-describedby", [`${control.id}-hint`, message ? `${control.id}-error` : null].filter(Boolean).join(" "));
  }

  function setRunning(on) {
    running = on;
    section.dataset.state = on ? "running" : section.dataset.state;
    run.disabled = on;
    cancel.hidden = !on;
    progress.hidden = !on;
    if (on) cancel.focus();
    else if (document.activeElement === cancel || document.activeElement === document.body) run.focus();
  }

  async function start() {
    if (running || !ready) return;
    // at once, before Python's check: what the section showed until now is no longer the answer
    section.dataset.state = "checking";
    showError(temps, null);
    showError(samplesInput, null);
    const checked = await collect();
    if (checked.errors) {
      const labels = Object.keys(checked.errors).map((name) => {
        const label = document.querySelector(`label[for="${name}"]`);
        return label ? label.textContent.trim() : name;
      });
      status.textContent = document.documentElement.dataset.course
        ? `First fix the workbench’s settings (${labels.join(", ")}): their messages are next to them, in chapter 1. The experiment uses them.`
        : Object.keys(checked.errors).every((name) => onScreen("controls", name))
        ? `First fix the settings marked above (${labels.join(", ")}); the experiment uses them.`
        : `This widget's settings cannot be used (${labels.join(", ")}); the experiment needs them.`;
      section.dataset.state = "invalid";
      return;
    }
    const req = { settings: checked.settings, temperatures: temps.value, mode: mode() };
    if (req.mode === "repeated") req.samples = samplesInput.value;
    cancelled = false;
    setRunning(true);
    status.textContent = "Starting…";
    try {
      const started = await call("experiment_start", req);
      if (!started.ok) {
        setRunning(false);
        section.dataset.state = "invalid";
        const other = [];
        for (const e of started.errors || []) {
          if (e.field === "temperatures") showError(temps, e.message);
          else if (e.field === "samples") showError(samplesInput, e.message);
          else other.push(`${e.label}: ${e.message}`);
        }
        const whose = document.documentElement.dataset.course ? "The workbench’s settings" : onScreen("controls") ? "The settings above" : "This widget's settings";
        status.textContent = other.length ? `${whose} cannot be used: ${other.join(" ")}` : "Fix the field marked above.";
        const first = [temps, samplesInput].find((c) => c.getAttribute("aria-invalid") === "true");
        if (first) first.focus();
        return;
      }
      progress.max = started.progress.total;
      progress.value = 0;
      const began = performance.now();
      for (;;) {
        if (cancelled) {
          status.textContent = "Cancelled. Nothing was changed; run it again when you like.";
          section.dataset.state = results.hidden ? "idle" : "done";
          return;
        }
        const step = await call("experiment_advance", { budget_ms: BATCH_MS });
        if (!step.ok) throw new Error((step.errors || []).map((e) => e.message).join(" "));
        progress.value = step.progress.done;
        status.textContent = runningStatus(step.progress.done, step.progress.total, performance.now() - began, "sample", "samples");
        if (step.done) {
          render(step.result, req.settings);
          const r = step.result;
          status.textContent = `Done: ${plural(r.rows.length * r.samples, "run", "runs")}, ${r.steps.toLocaleString("en")} steps.`;
          section.dataset.state = "done";
          return;
        }
      }
    } catch (err) {
      status.textContent = `The experiment stopped with an error: ${err.message}`;
      section.dataset.state = "error";
    } finally {
      if (running) setRunning(false);
    }
  }

  function render(result, settings) {
    const chart = el("figure", "xp-chart");
    const cap = el("figcaption");
    cap.append(el("strong", null, "The measures at each temperature. "),
      result.mode === "repeated"
        ? "Dots are means; the bars reach one standard deviation either side. The table below has the same numbers."
        : "One sample each, so no spread. The table below has the same numbers.");
    const panels = el("div", "xp-panels");
    for (const m of result.measures) panels.append(panel(m, result.rows, result.mode));
    chart.append(cap, panels);
    const wrap = el("div", "table-wrap");
    wrap.append(table(result));
    const uses = el("p", "xp-uses", describe(result, settings));
    const say = el("p", "xp-takeaway", takeaway(result));
    results.replaceChildren(say, uses, samples(result, settings.prompt), chart, wrap);
    results.hidden = false;
  }

  function describe(result, s) {
    const bits = [result.uses, s.prompt ? `prompt “${readable(s.prompt)}”` : "empty prompt"];
    bits.push(result.filters.length ? result.filters.join(", ") : "no filters");
    if (Number(s.repetition_penalty) !== 1) bits.push(`repetition penalty ${s.repetition_penalty}`);
    bits.push(`at most ${s.max_new_tokens} new tokens`);
    const seeds = result.seeds[0] === result.seeds[1] ? `seed ${result.seeds[0]}` : `seeds ${result.seeds[0]} to ${result.seeds[1]}`;
    return `Settings: ${bits.join(", ")}; ${seeds}.`;
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    start();
  });
  cancel.addEventListener("click", () => {
    cancelled = true;
    status.textContent = "Cancelling after this batch…";
  });

  return {
    ready(info) {
      ready = true;
      // what Python says the page's experiment starts with (enough samples to measure)
      const d = (info && info.experiment_defaults) || {};
      if (d.mode) for (const r of modeRadios) r.checked = r.value === d.mode;
      if (d.samples) samplesInput.value = String(d.samples);
      for (const c of form.elements) c.disabled = false;
      syncMode();
      section.dataset.state = "idle";
    },
    start,
  };
}
