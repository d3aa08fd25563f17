// The live cache check of a run with a KV cache (a transformer's, the real model's): a card beside the text (the cache's memory, the
// check's verdict, a chart and a table of every step) and a line in the step inspector. Every
// number comes from the run's step records (cache_diff, cache_ok, cache_length, context_shift),
// made by Python; the chart of a check (checkChart) serves the bugs lab too.

import { cacheShape, shapeOf } from "./costs.js";
import { $ } from "../ui/dom.js";
import { drawResponsive, lineChart, sci, verdict } from "../ui/plot.js";
import { bytes } from "../ui/bytes.js";
import { el, plural, readable } from "../ui/render.js";

// The tolerance the live check is judged against, and the cache's shape and bytes, come from
// Python with the page's info (cache_tolerance, datasets[...].transformer).
const TABLE_ROWS = 400; // the table alternative lists at most this many steps
const FLOOR = -17; // log10 of where an exact 0 is drawn
const DOTS_MAX = 120; // a chart of up to this many steps marks each with a dot

/** The stat the step inspector shows for a transformer step: [term, value] or null. */
export function cacheStat(step) {
  if (pending(step)) return ["Cache check", "pending"];
  if (step.cache_diff == null) return null;
  return ["Cache check", `${step.cache_ok ? "✓" : "✕"} ${sci(step.cache_diff).replace(/ × /, "×")}`];
}

/** A step whose live check is still to come: it runs behind the text (Python's livecheck). */
export function pending(step) {
  return step.cache_diff === null && "cache_ok" in step;
}

/** The live check's limit for a run: its model's own (start's reply), else the page's. */
export function runTolerance(run, info) {
  return run && run.cache ? run.cache.tolerance : info.cache_tolerance;
}

/** Sentences for the step inspector's notes about the cache at this step. */
export function cacheNotes(step, tolerance, rule = "reread", every = null) {
  const notes = [];
  if (pending(step)) {
    notes.push(`Cache check: not made yet. It waits for the text to end${every ? ` (or for ${every} steps on a longer run)` : ""}, so the text goes at the cache’s speed; then one full recomputation of the text checks every step at once.`);
  }
  if (step.cache_diff != null) {
    notes.push(step.cache_ok
      ? `Cache check: the logits from the cache (${plural(step.cache_length, "position", "positions")}) and a full recomputation of the same text differ by at most ${sci(step.cache_diff)}, within the tolerance ${sci(tolerance)}.`
      : `Cache check failed: the cached logits differ from a full recomputation by ${sci(step.cache_diff)}, more than the tolerance ${sci(tolerance)}.`);
  }
  if (step.context_shift) {
    notes.push(rule === "kshift"
      ? "Context shift (K-shift): the window was full, so the oldest half of the text was dropped; nothing was read again. The kept keys were turned back by the dropped length, so they sit at positions from 0. Not exact: their deeper layers were computed while the dropped text was still in view, which the check shows."
      : "Context shift: the window was full, so the oldest half of the text was dropped and the rest read again (prefilled) at positions from 0.");
  }
  return notes;
}

/** The first and the last step, and between them at most two points per column: the lowest and
 * the highest of the steps that fall in it, in step order. With a column every two pixels, a line through thousands of steps looks just the
 * same as one through all of them (no spike is hidden), and draws in constant time. */
export function envelope(points, columns) {
  columns = Math.max(1, Math.floor(columns) || 1);
  const n = points.length;
  if (n <= 2 * columns + 2) return points;
  const out = [points[0]]; // the line starts at the first step and ends at the newest
  for (let c = 0; c < columns; c++) {
    const from = Math.floor((c * n) / columns);
    const to = Math.floor(((c + 1) * n) / columns);
    let lo = from;
    let hi = from;
    for (let i = from + 1; i < to; i++) {
      if (points[i][1] < points[lo][1]) lo = i;
      if (points[i][1] > points[hi][1]) hi = i;
    }
    for (const i of lo === hi ? [lo] : [Math.min(lo, hi), Math.max(lo, hi)]) {
      if (i !== 0 && i !== n - 1) out.push(points[i]);
    }
  }
  out.push(points[n - 1]);
  return out;
}

/** The per-step check as a chart: |cached − recomputed| on a log scale, with the tolerance. */
export function checkChart(diffs, { width, tolerance, shifts = [], title = "Largest |cached − recomputed| logit" }) {
  const n = diffs.length;
  const worst = Math.max(0, ...diffs);
  const top = Math.max(1, Math.ceil(Math.log10(Math.max(worst, 1e-16))));
  const pass = diffs.filter((d) => d <= tolerance).length;
  const label = n
    ? `${title}, per step, for ${plural(n, "step", "steps")}: ${pass} within the tolerance ${sci(tolerance)}, ${n - pass} above it; the largest is ${sci(worst)}.`
    : "No steps yet.";
  const at = (d) => (d > 0 ? d : 10 ** FLOOR);
  return lineChart({
    label,
    x: { min: 1, max: Math.max(2, n), title: "Step", integer: true },
    y: { min: FLOOR, max: top, log: true, title: "|difference|" },
    // up to DOTS_MAX steps each gets a dot; beyond, a line through each sliver's extremes
    series: [n > DOTS_MAX
      ? { points: envelope(diffs.map((d, i) => [i + 1, at(d)]), width / 2), className: "kv-check", marker: "none" }
      : { points: diffs.map((d, i) => [i + 1, at(d)]), className: "kv-check", marker: "dot" }],
    marks: diffs.map((d, i) => (d > tolerance
      ? { x: i + 1, y: at(d), shape: "cross", className: "is-bad", title: `Step ${i + 1}: ${sci(d)}` }
      : null)).filter(Boolean).slice(0, 400),
    hlines: [{ y: tolerance, className: "kv-tolerance", label: `tolerance ${sci(tolerance)}` }],
    vlines: shifts.map((s) => ({ x: s + 1, className: "kv-shift", label: "shift" })),
  }, width);
}

// --- the live cache check ---------------------------------------------------------------------

export function createLiveCheck(app) {
  const dom = {
    card: $("cache-card"),
    meta: $("cache-meta"),
    memoryLine: $("cache-memory-line"),
    fill: $("cache-fill-bar"),
    verdict: $("cache-verdict"),
    off: $("cache-off"),
    figure: $("cache-plot-figure"),
    plot: $("cache-plot"),
    caption: $("cache-plot-caption"),
    table: $("cache-table"),
    rows: $("cache-rows"),
    tableNote: $("cache-table-note"),
  };
  let run = null;
  let frame = 0;
  let tableDirty = true;


  function positions(r) {
    // the window the logits of the latest step came from: what the cache held then, in the
    // run's own model's cache (start's reply), else the dataset's transformer's
    const shape = r.cache ? shapeOf(r.cache) : cacheShape(app.info(), r.settings.dataset);
    const last = r.steps[r.steps.length - 1];
    if (!shape || !last) return null;
    // allocated: what Python says the cache holds now (one that grows by blocks holds more as
    // the run goes on), else the whole window
    return { shape, filled: last.cache_length, allocated: r.cacheBytes ?? shape.allocated };
  }

  function render() {
    frame = 0;
    if (!run) return;
    const checked = run.steps.filter((s) => s.cache_diff != null);
    const p = positions(run);
    if (p) {
      const { shape, filled, allocated } = p;
      const growth = shape.reserve ? `, taken ${shape.reserve} positions at a time` : "";
      dom.memoryLine.textContent = `${filled} of ${shape.context_size} cache positions filled: ${bytes(filled * shape.perToken)} in use of ${bytes(allocated)} allocated${growth} (${shape.n_layer} layers × K and V × ${shape.n_kv_head} KV heads × ${shape.head_dim} numbers × ${shape.bytes_per_element} bytes = ${bytes(shape.perToken)} per position).`;
      dom.fill.style.setProperty("--w", `${(100 * filled) / shape.context_size}%`);
    }
    const shifts = run.steps.map((s, i) => (s.context_shift ? i : -1)).filter((i) => i >= 0);
    // a tool's result is appended in one pass: the cache grows by all of it at once
    const resumes = run.steps.filter((s, i) => s.source === "tool" && i > 0 && run.steps[i - 1].source !== "tool");
    dom.meta.textContent = `${plural(run.steps.length, "step", "steps")}${shifts.length ? ` · ${plural(shifts.length, "context shift", "context shifts")}` : ""}${resumes.length ? ` · ${plural(resumes.length, "tool result", "tool results")} appended to the cache` : ""}`;
    const on = run.settings.cache_check !== false;
    dom.off.hidden = on;
    dom.figure.hidden = !on;
    dom.table.hidden = !on;
    if (!on) {
      dom.verdict.textContent = "";
      dom.verdict.className = "kv-verdict";
      return;
    }
    const diffs = checked.map((s) => s.cache_diff);
    const tolerance = runTolerance(run, app.info());
    const bad = checked.findIndex((s) => !s.cache_ok);
    const worst = Math.max(0, ...diffs);
    const skipped = run.finish ? run.finish.check_skipped || 0 : 0;
    if (run.done) {
      if (bad >= 0) {
        verdict(dom.verdict, false, `The cache check failed at step ${bad + 1}.`,
          `The cached logits differ from a full recomputation by ${sci(checked[bad].cache_diff)}, above the tolerance ${sci(tolerance)}.`);
      } else if (skipped) { // given up for the next run (or Stop) while it caught up
        dom.verdict.className = "kv-verdict";
        dom.verdict.textContent = `The cache check was given up: the next run was asked for (or Stop pressed) while it caught up, so ${plural(skipped, "step was", "steps were")} not checked${diffs.length ? `; the ${plural(diffs.length, "step", "steps")} checked before agreed up to rounding (largest difference ${sci(worst)})` : ""}.`;
      } else {
        // a run cut off by a failure (run.finish unset) says so: it did not run to its end
        const cut = run.finish ? "" : " The run itself was cut off there.";
        verdict(dom.verdict, true, `The cache check passed at ${run.finish ? "all " : "each of the "}${plural(diffs.length, "step", "steps")}${run.finish ? "" : " that ran"}.`,
          `The largest difference between the cached logits and a full recomputation was ${sci(worst)}, below the tolerance ${sci(tolerance)}: they agree up to rounding.${cut}`);
      }
    } else {
      dom.verdict.className = "kv-verdict";
      const made = run.steps.filter((s) => s.source !== "tool").length;
      dom.verdict.textContent = run.checking
        ? `The text has ended: its ${plural(made, "step", "steps")} are being checked against one full pass over the whole text…`
        : checked.length
        ? `Checking behind the text: ${checked.length} of ${plural(made, "step", "steps")} checked, largest difference so far ${sci(worst)}.`
        : `The check follows when the text ends: ${plural(made, "step", "steps")} to check.`;
    }
    dom.caption.textContent = `Each point is one step: the largest difference between any logit from the cache and from a full recomputation of the whole text, on a log scale (each grid line is 1000× the one below). Points under the dashed line are within the tolerance: the two computations agree up to rounding.${diffs.length > DOTS_MAX ? " With more steps than the line has room for, it shows the lowest and the highest step of each sliver of it, so no jump is hidden." : ""}${shifts.length ? " “shift” marks a context shift." : ""}`;
    drawResponsive(dom.plot, (width) => checkChart(diffs, { width, shifts, tolerance }));
    tableDirty = true;
    if (dom.table.open) fillTable();
  }

  function fillTable() {
    if (!tableDirty || !run) return;
    tableDirty = false;
    const steps = run.steps.slice(0, TABLE_ROWS);
    dom.rows.replaceChildren(...steps.map((s, i) => {
      const tr = el("tr", s.cache_ok === false ? "is-bad" : null);
      const th = el("th", null, String(i + 1));
      th.scope = "row";
      const kind = s.phase === "prefill" ? "prefill" : s.source === "tool" ? "appended (tool)" : "decode";
      tr.append(th, el("td", null, s.context_shift ? `${kind} (shift)` : kind),
        el("td", null, readable(s.token_text)), el("td", null, s.cache_length == null ? "–" : String(s.cache_length)),
        el("td", "num", sci(s.cache_diff)), el("td", null, pending(s) ? "pending" : s.cache_diff == null ? "–" : s.cache_ok ? "✓ within" : "✕ above"));
      return tr;
    }));
    dom.tableNote.textContent = run.steps.length > TABLE_ROWS ? `The first ${TABLE_ROWS} of ${run.steps.length} steps.` : "";
  }
  dom.table.addEventListener("toggle", fillTable);

  // While a run streams, the card follows it ten times a second (like the step inspector); once
  // the run has ended, it is drawn at the next frame.
  let drawnAt = 0;
  let timer = 0;
  function schedule() {
    if (frame) return;
    const wait = run && !run.done ? 100 - (performance.now() - drawnAt) : 0;
    if (wait > 0) {
      if (!timer) timer = setTimeout(() => { timer = 0; schedule(); }, wait);
      return;
    }
    clearTimeout(timer);
    timer = 0;
    frame = requestAnimationFrame(() => {
      drawnAt = performance.now();
      render();
    });
  }

  return {
    run: () => run,
    // What the cache of the latest run with one holds: {model, dataset, filled, shape} or null.
    usage() {
      const p = run && run.steps.length ? positions(run) : null;
      return p && { model: run.settings.model, dataset: run.settings.dataset, ...p };
    },
    runStarted(r) {
      const cached = Boolean(r.cache); // a transformer's or the real model's: Python says
      dom.card.hidden = !cached;
      run = cached ? r : null;
      if (run) {
        dom.rows.replaceChildren();
        schedule();
      }
    },
    steps(r) {
      if (run && r === run) schedule();
    },
    runDone(r) {
      if (run && r === run) schedule();
    },
  };
}

