// The serving chapter: a workload served from a paged cache (Python's lesson.serving.Serving,
// through serving_start and serving_advance, a few scheduler steps a batch: progress and Stop).
// Drawn step by step (a range, Play with a speed, slow motion included): the scheduler's
// decisions in words, the memory bar, the block pool, the block tables, the prefix tree and who
// ran when; then the measures beside the paper's (waste, sharing, steps against static batching).

import { createPlanned } from "../lesson/planned.js";
import { createPlayer } from "../search/play.js";
import { barLabel, drawBar, drawGrid, drawTables, drawTimeline, drawTree, gridLabel, memoryParts, stepWords } from "./pool.js";
import { fieldDefaults } from "../state/settings.js";
import { $ } from "../ui/dom.js";
import { el, pct, plural, seconds } from "../ui/render.js";

const FIELDS = {
  model: "serving-model", dataset: "serving-dataset", tokenizer: "serving-tokenizer", requests: "serving-requests",
  block_size: "serving-block-size", memory_blocks: "serving-memory", max_running: "serving-running",
  parallel_samples: "serving-samples", seed: "serving-seed", workload: "serving-workload",
};
const SIZES = ["requests", "block_size"]; // what a model's own defaults set
const BAR_WORDS = { used: "used", reserved: "reserved, empty", cached: "prefix tree", free: "free" };

/** The run in a few sentences, every number from Python's result. */
export function servingSummary(r) {
  const w = r.waste;
  const who = r.own_workload ? "Your workload" : "The seeded workload";
  const seqs = r.parallel_samples > 1 ? ` (${r.runs / r.parallel_samples} prompts × ${r.parallel_samples} samples)` : "";
  const out = [
    `${who}: ${plural(r.runs, "request", "requests")}${seqs} served from ${r.memory_blocks} blocks of ${r.block_size} positions, ${plural(r.max_running, "request", "requests")} at a time at most, in ${plural(r.steps, "step", "steps")}; static batching, where a batch runs to its end before anyone joins, took ${r.static_steps}.`,
    `Reserving the whole window (${r.window} positions) for every request would have left ${pct(w.contiguous_max)} of its memory empty; reserving exactly the length each one ended with, ${pct(w.contiguous_actual)}, because the room waits from the first step; paged, ${pct(w.paged)}: only the last block of a request has room left.`,
  ];
  const shared = [];
  if (r.prefix_hit_rate) shared.push(`The prefix tree found ${pct(r.prefix_hit_rate)} of the prompts’ tokens: ${plural(r.prefill_tokens_saved, "position was", "positions were")} not computed again`);
  if (r.copies_on_write) shared.push(`${plural(r.copies_on_write, "block was", "blocks were")} copied on write`);
  if (r.preemptions) shared.push(`${plural(r.preemptions, "preemption", "preemptions")} when the blocks ran out`);
  if (r.evicted) shared.push(`the prefix tree gave back ${plural(r.evicted, "block", "blocks")} that no request held, the least recently used first, to make room (eviction)`);
  if (shared.length) out.push(`${shared.join("; ")}.`);
  if (r.system) out.push(`Every request began with the system message “${r.system}”.`);
  const m = r.measured;
  if (m) out.push(`The requests’ prefills took ${seconds(1000 * m.prefill_s)} here with the prefix tree, and ${seconds(1000 * m.prefill_s_without_tree)} in the static run, which has no tree (measured on this machine, so not the same twice).`);
  return out.join(" ");
}

export function servingStats(r) {
  return [
    ["Steps, continuous", String(r.steps)],
    ["Steps, static", String(r.static_steps)],
    ["Waste, whole window", pct(r.waste.contiguous_max)],
    ["Waste, final length", pct(r.waste.contiguous_actual)],
    ["Waste, paged", pct(r.waste.paged)],
    ["Blocks shared by requests (most)", String(r.blocks_shared)],
    ["Copied on write", String(r.copies_on_write)],
    ["Prefix tree hits", r.prefix_hit_rate == null ? "–" : pct(r.prefix_hit_rate)],
    ["Prefill saved", plural(r.prefill_tokens_saved, "position", "positions")],
    ["Preempted", String(r.preemptions)],
  ];
}

export function createServing(app) {
  const dom = {
    form: $("serving-form"), out: $("serving-out"), summary: $("serving-summary"), stats: $("serving-stats"),
    step: $("serving-step"), stepOut: $("serving-step-out"), play: $("serving-play"), speed: $("serving-speed"),
    events: $("serving-events"), bar: $("serving-bar"), barLegend: $("serving-bar-legend"),
    grid: $("serving-grid"), gridNone: $("serving-grid-none"), gridLegend: $("serving-grid-legend"),
    tables: $("serving-tables"), tree: $("serving-tree"), timeline: $("serving-timeline"),
    rows: $("serving-rows"), command: $("serving-command"), edit: $("serving-edit"),
  };
  const controls = Object.fromEntries(Object.entries(FIELDS).map(([name, id]) => [name, $(id)]));
  let shown = null;
  let labels = {};

  function request() {
    const out = {};
    for (const [name, c] of Object.entries(controls)) out[name] = name === "workload" ? c.value.split("\n") : c.value;
    return out;
  }

  function drawStep(k) {
    const frame = shown.frames[k];
    dom.stepOut.value = String(k);
    dom.stepOut.textContent = String(k);
    dom.events.textContent = stepWords(frame, labels, shown.block_size);
    dom.bar.replaceChildren(...drawBar(frame));
    dom.bar.setAttribute("aria-label", barLabel(frame));
    dom.barLegend.replaceChildren(...memoryParts(frame).map(([key, n]) => {
      const li = el("li");
      li.append(el("span", `swatch is-${key}`), `${BAR_WORDS[key]}: ${n}`);
      return li;
    }));
    const grid = shown.grid && frame.state;
    dom.grid.hidden = !grid;
    dom.gridLegend.hidden = !grid;
    dom.gridNone.hidden = !!grid;
    if (grid) {
      dom.grid.replaceChildren(drawGrid(frame, labels));
      dom.grid.setAttribute("aria-label", gridLabel(frame));
      dom.tree.replaceChildren(drawTree(frame));
    } else {
      dom.gridNone.textContent = `A pool of ${shown.memory_blocks} blocks is too many squares to draw; the bar above counts them.`;
      dom.tree.replaceChildren(el("p", "hint", "Not drawn for a pool this large."));
    }
    dom.tables.replaceChildren(...drawTables(frame, labels));
    dom.timeline.replaceChildren(drawTimeline(shown, k));
  }

  const player = createPlayer(dom.step, dom.play, (k) => shown && drawStep(k), () => Number(dom.speed.value));

  function render(result) {
    shown = result;
    app.last.serving = result;
    labels = Object.fromEntries(result.requests.map((r) => [r.number, r.label]));
    dom.summary.textContent = servingSummary(result);
    dom.stats.replaceChildren(...servingStats(result).map(([term, value]) => {
      const div = el("div", "stat");
      div.append(el("dt", null, term), el("dd", null, value));
      return div;
    }));
    dom.step.max = String(result.frames.length - 1);
    dom.step.value = "0";
    player.reset();
    drawStep(0);
    dom.rows.replaceChildren(...result.requests.map((r) => {
      const tr = el("tr");
      const text = el("td", "serving-text");
      text.append(el("span", "prompt-text", r.prompt), el("span", "gen-text", r.text));
      tr.append(el("td", "num", r.label), el("td", "num", String(r.arrival)), el("td", "num", String(r.joined_step)),
        el("td", "num", String(r.finished_step)), el("td", "num", r.preempted ? `${r.preempted}×` : "–"), text);
      return tr;
    }));
    dom.command.textContent = result.command;
  }

  const planned = createPlanned({
    call: app.call, endpoints: ["serving_start", "serving_advance"], box: dom.form, inputs: controls,
    status: $("serving-status"), results: dom.out, render, unit: ["request", "requests"],
    runButton: $("serving-run"), stop: $("serving-stop"), progress: $("serving-progress"), request,
  });

  dom.edit.addEventListener("click", () => {
    if (!shown) return;
    controls.workload.value = shown.workload_lines.join("\n");
    controls.workload.focus();
  });
  // the real model brings its own tokenizer and chat template: the dataset fields do not apply
  const chat = $("serving-chat");
  function fitModel() {
    const real = controls.model.value !== "transformer";
    for (const name of ["dataset", "tokenizer"]) controls[name].closest(".field").hidden = real;
    chat.hidden = !real;
  }
  controls.model.addEventListener("change", () => {
    // each model's own numbers (Python's): fewer requests and smaller blocks for the real one
    const own = controls.model.value === "transformer" ? api.defaults() : (app.info() || {}).serving_pretrained || {};
    for (const [name, value] of Object.entries(own)) {
      if (SIZES.includes(name)) controls[name].value = String(value);
    }
    fitModel();
  });
  // a dataset read by one tokenizer only (tasks: BPE) takes it (Python's catalog says which)
  controls.dataset.addEventListener("change", () => {
    const d = ((app.info() || {}).datasets || {})[controls.dataset.value];
    if (d && d.tokenizers && !d.tokenizers.includes(controls.tokenizer.value)) controls.tokenizer.value = d.tokenizers[0];
  });

  const api = {
    ready() {
      for (const c of [...dom.form.elements]) c.disabled = false;
      dom.play.disabled = true;
      // the panel's own settings a link gave (catalog's panel_settings; Python checks them when it serves)
      const own = ((app.info() || {}).panel_settings || {}).serving || [];
      for (const [name, value] of Object.entries(app.fromLink(own))) controls[name].value = value;
      fitModel();
    },
    /** The panel's fields at Python's defaults (its field table's, from the catalog), by name. */
    defaults: () => ({ ...fieldDefaults(app.info().fields, Object.keys(FIELDS).filter((n) => n !== "model")), model: "transformer" }),
    /** Set some of the panel's fields (by name) and serve; resolves with the result. */
    async serve(values = {}) {
      for (const [name, value] of Object.entries(values)) controls[name].value = Array.isArray(value) ? value.join("\n") : String(value);
      fitModel();
      return planned.start();
    },
    last: () => shown,
    drawStep,
  };
  return api;
}
