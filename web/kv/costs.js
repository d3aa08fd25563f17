// What the cache costs: the KV memory calculator (the kv-memory contract, computed by Python:
// webapi.memory -> costs.memory) with presets of published model shapes and the page's own
// tiny transformer, live; and a measured sweep of time and K/V bytes per decode step against
// context length, with the cache and without it (webapi.cost_sweep -> costs.step_costs).

import { drawResponsive, lineChart } from "../ui/plot.js";
import { bytes } from "../ui/bytes.js";
import { ask, el, fieldError, pct } from "../ui/render.js";
import { fieldDefaults, modelOf } from "../state/settings.js";
import { $ } from "../ui/dom.js";

/** The tiny transformer's cache shape for a dataset, from the info Python sent at boot. */
export function cacheShape(info, dataset) {
  const t = info && info.datasets && info.datasets[dataset] && info.datasets[dataset].transformer;
  return t ? shapeOf(t) : null;
}

/** A cache's shape as Python gives it (kvcache.cache_shape), with its bytes per position and allocated. */
export function shapeOf(c) {
  return { ...c, perToken: c.bytes_per_token, allocated: c.bytes_per_token * c.context_size };
}

function ms(x) {
  if (x == null) return "–";
  return x >= 10 ? `${x.toFixed(0)} ms` : x >= 1 ? `${x.toFixed(1)} ms` : `${x.toFixed(2)} ms`;
}

/** A paged cache of the calculator's shape: whole blocks per sequence, and the room left empty. */
export function pagedWords(r) {
  const v = r.inputs;
  const empty = r.blocks_per_sequence * v.block_size - v.tokens;
  const room = empty
    ? `${empty.toLocaleString("en")} ${empty === 1 ? "position" : "positions"} of the last block reserved and empty, ${pct(r.paged_waste)}`
    : "nothing reserved and empty: the tokens fill whole blocks";
  return `Paged in blocks of ${v.block_size} positions (as vLLM keeps it): ${r.blocks_per_sequence.toLocaleString("en")} blocks per sequence, ${bytes(r.paged_total_bytes)} in total; ${room}. A cache reserved for a longer window than the text would hold that room from the start.`;
}

/** A menu of Python's choices ({id, label}), then one for numbers of one's own (value ""). */
function fillMenu(select, items, own) {
  select.replaceChildren(...items.map((item) => Object.assign(el("option", null, item.label), { value: item.id })),
    Object.assign(el("option", null, own), { value: "" }));
}

export function createMemoryView(app, live) {
  const dom = {
    form: $("mem-form"),
    preset: $("mem-preset"),
    note: $("mem-preset-note"),
    cacheType: $("mem-cache-type"),
    cacheTypeNote: $("mem-cache-type-note"),
    perToken: $("mem-per-token"),
    total: $("mem-total"),
    formula: $("mem-formula"),
    saving: $("mem-saving"),
    paged: $("mem-paged"),
    live: $("mem-live"),
    rows: $("mem-rows"),
    costRun: $("cost-run"),
    costStatus: $("cost-status"),
    costOut: $("cost-out"),
    timePlot: $("cost-time-plot"),
    timeCaption: $("cost-time-caption"),
    bytesPlot: $("cost-bytes-plot"),
    bytesCaption: $("cost-bytes-caption"),
    costRows: $("cost-rows"),
    costSummary: $("cost-summary"),
  };
  // the calculator's inputs, by field name (data-field): their checks and defaults are Python's
  const inputs = Object.fromEntries([...dom.form.querySelectorAll("input[data-field]")].map((c) => [c.dataset.field, c]));
  const FIELDS = Object.keys(inputs);
  const defaults = () => fieldDefaults(app.info().fields, FIELDS);
  let presets = [];
  let cacheTypes = []; // the types of number a cache can hold, from Python
  let chosen = "seed"; // the menu's choice, kept for when the menu arrives: a preset, or "" (own numbers)
  let last = null;
  let timer = null;
  let seq = 0;

  function showError(name, message) {
    fieldError(inputs[name] || dom.preset, message);
  }

  function fillPreset(id) {
    const p = presets.find((x) => x.id === id);
    if (!p) return;
    for (const f of FIELDS) {
      if (p[f] != null) inputs[f].value = String(p[f]);
    }
    if (p.tokens == null) inputs.tokens.value = defaults().tokens;
    if (p.sequences == null) inputs.sequences.value = defaults().sequences;
  }

  async function compute() {
    const mine = ++seq;
    const request = { dataset: app.settings().dataset, preset: chosen || null };
    for (const f of FIELDS) request[f] = inputs[f].value.trim();
    let reply;
    try {
      reply = await app.call("memory", request);
    } catch (err) {
      reply = { ok: false, errors: [{ field: "preset", message: `Something went wrong in Python: ${err.message}` }] };
    }
    if (mine !== seq) return null; // a newer calculation is on its way
    for (const f of [...FIELDS, "preset"]) showError(f, null);
    app.last.memory = reply;
    if (!reply.ok) {
      for (const e of reply.errors || []) showError(e.field, e.message);
      dom.form.classList.add("is-stale");
      return reply;
    }
    dom.form.classList.remove("is-stale");
    if (!presets.length) {
      presets = reply.presets;
      fillMenu(dom.preset, presets, "Your own numbers");
      dom.preset.value = reply.preset || chosen; // (a preset or numbers set before the menu came)
      fillComparison();
    }
    if (!cacheTypes.length) {
      cacheTypes = reply.cache_types;
      fillMenu(dom.cacheType, cacheTypes, "Other: the bytes below");
      dom.cacheType.disabled = false;
    }
    dom.cacheType.value = reply.cache_type || ""; // what these bytes per number are
    last = reply;
    render();
    return reply;
  }

  function render() {
    const r = last;
    if (!r) return;
    const v = r.inputs;
    dom.perToken.textContent = bytes(r.bytes_per_token);
    dom.total.textContent = bytes(r.total_bytes);
    const seqs = v.sequences > 1 ? ` × ${v.sequences.toLocaleString("en")} sequences` : "";
    dom.formula.textContent = `2 (K and V) × ${v.layers} layers × ${v.kv_heads} KV heads × ${v.head_dim} numbers × ${v.bytes_per_element} bytes = ${r.bytes_per_token.toLocaleString("en")} bytes per token; × ${v.tokens.toLocaleString("en")} tokens${seqs} = ${r.total_bytes.toLocaleString("en")} bytes.`;
    dom.saving.textContent = r.saving > 1
      ? `With one KV head per query head (multi-head attention, ${v.heads} KV heads) it would be ${bytes(r.mha_bytes_per_token)} per token and ${bytes(r.mha_total_bytes)} in total: sharing KV heads saves ${r.saving}×.`
      : "Every query head has its own KV head (multi-head attention): nothing is shared.";
    dom.paged.textContent = pagedWords(r);
    const p = presets.find((x) => x.id === dom.preset.value);
    dom.note.textContent = p ? p.note : "Your own numbers.";
    const t = cacheTypes.find((x) => x.id === r.cache_type);
    dom.cacheTypeNote.textContent = t ? t.note : `${v.bytes_per_element} bytes a number, as typed below.`;
    updateLive();
  }

  // This page's own model, or the real one once it ran here: what its cache holds right now,
  // next to what it allocated.
  function updateLive() {
    const usage = live.usage();
    // a preset with the shape of a model of this page (Python says which) draws that model's run
    const preset = presets.find((x) => x.id === dom.preset.value);
    if (preset && preset.model && usage && usage.model === preset.model) {
      const { shape, filled, allocated } = usage;
      const growth = shape.reserve ? ` (float32 there, as the preset counts it). It takes ${shape.reserve} positions at a time as the run fills them, not the window’s ${bytes(shape.allocated)} at once.` : " (float32 there, as the preset counts it).";
      dom.live.textContent = `Live, from the latest run of ${(modelOf(app.info(), preset.model) || {}).name || preset.label} in this page: ${filled} of ${shape.context_size} positions in use, ${bytes(filled * shape.perToken)} of the ${bytes(allocated)} its session allocated${growth}`;
      dom.live.hidden = false;
      return;
    }
    const shape = cacheShape(app.info(), app.settings().dataset);
    if (!shape || dom.preset.value !== "tiny") {
      dom.live.hidden = true;
      return;
    }
    let text = `Live: no transformer run on this dataset yet. Its cache is preallocated: ${bytes(shape.allocated)} for ${shape.context_size} positions, before the first token.`;
    if (usage && usage.model === "transformer" && usage.dataset === app.settings().dataset) {
      text = `Live, from the latest run: ${usage.filled} of ${shape.context_size} positions in use, ${bytes(usage.filled * shape.perToken)} of the ${bytes(usage.allocated)} allocated. The cache is allocated once, at full size; decoding only fills it.`;
    }
    dom.live.textContent = text;
    dom.live.hidden = false;
  }

  function fillComparison() {
    const rows = presets.map((p) => ({ p, per: p.bytes_per_token }));
    const most = Math.max(...rows.map((r) => r.per));
    dom.rows.replaceChildren(...rows.map(({ p, per }) => {
      const tr = el("tr");
      const th = el("th", null, p.label);
      th.scope = "row";
      const cell = el("td");
      const inner = el("div", "mem-bar-cell");
      const bar = el("span", `mem-bar kind-${p.kind.toLowerCase()}`);
      bar.style.setProperty("--w", `${Math.max(0.5, (100 * Math.log2(per)) / Math.log2(most))}%`);
      bar.setAttribute("aria-hidden", "true");
      inner.append(bar, el("span", "num", bytes(per)));
      cell.append(inner);
      tr.append(th, el("td", null, p.kind), el("td", "num", `${p.heads} / ${p.kv_heads}`), el("td", null, p.number), cell);
      return tr;
    }));
  }

  dom.preset.addEventListener("change", () => {
    chosen = dom.preset.value;
    fillPreset(dom.preset.value);
    compute();
  });
  // Another type of number for the same shape: its bytes go below, and the preset stays
  dom.cacheType.addEventListener("change", () => {
    const t = cacheTypes.find((x) => x.id === dom.cacheType.value);
    if (!t) return; // "Other": the bytes below are the learner's
    inputs.bytes_per_element.value = String(t.bytes);
    compute();
  });
  dom.form.addEventListener("input", (event) => {
    if (event.target === dom.preset || event.target === dom.cacheType) return;
    dom.preset.value = chosen = "";
    clearTimeout(timer);
    timer = setTimeout(compute, 250);
  });
  dom.form.addEventListener("submit", (event) => {
    event.preventDefault();
    compute();
  });
  // The tiny preset is the transformer of the chosen dataset: fetch the presets again.
  app.onSetting("dataset", async () => {
    const keep = dom.preset.value;
    presets = [];
    await compute();
    if (keep === "tiny" && presets.some((p) => p.id === "tiny")) {
      dom.preset.value = "tiny";
      fillPreset("tiny");
      compute();
    }
  });

  // --- measured cost per step ---------------------------------------------------------------

  dom.costRun.addEventListener("click", async () => {
    dom.costStatus.textContent = "Measuring: each length is decoded with the cache and recomputed without it…";
    const reply = await ask(app, "cost_sweep", { dataset: app.settings().dataset }, dom.costRun, "dataset");
    app.last.costs = reply;
    if (!reply.ok) {
      dom.costStatus.textContent = (reply.errors || []).map((e) => e.message).join(" ");
      return;
    }
    dom.costStatus.textContent = `Measured in this browser, ${reply.dtype}, median of ${reply.repeats} runs per length.`;
    showCosts(reply);
  });

  function showCosts(r) {
    dom.costOut.hidden = false;
    const rows = r.rows;
    const end = rows[rows.length - 1];
    const first = rows[0];
    const maxT = Math.max(...rows.map((x) => x.uncached_ms));
    dom.costSummary.textContent = `At ${end.context} tokens a cached step took ${ms(end.cached_ms)}; recomputing the whole window took ${ms(end.uncached_ms)}, ${end.speedup.toFixed(0)}× as long. Yet the cached step read ${bytes(end.kv_bytes_read)} of keys and values, ${Math.round(end.kv_bytes_read / first.kv_bytes_read)}× what it read at ${first.context} tokens: the cache saves computing, not reading.`;
    drawResponsive(dom.timePlot, (width) => lineChart({
      label: `Milliseconds per decode step against context length. With the cache: from ${ms(first.cached_ms)} to ${ms(end.cached_ms)}. Without: from ${ms(first.uncached_ms)} to ${ms(end.uncached_ms)}.`,
      x: { min: 0, max: r.context_size, title: "Context length (tokens)" },
      y: { min: 0, max: maxT * 1.08, title: "ms per step", format: (v) => String(Number(v.toPrecision(3))) },
      series: [
        { points: rows.map((x) => [x.context, x.uncached_ms]), className: "kv-off", label: "cache off" },
        { points: rows.map((x) => [x.context, x.cached_ms]), className: "kv-on", label: "cache on" },
      ],
    }, width));
    dom.timeCaption.textContent = "Time per decode step. Without the cache every step runs the whole window through the model again, so it grows with the context; with the cache a step computes one new position.";
    const kib = (x) => x / 1024;
    drawResponsive(dom.bytesPlot, (width) => lineChart({
      label: `K/V bytes one cached decode step reads, against context length: from ${bytes(first.kv_bytes_read)} to ${bytes(end.kv_bytes_read)}, growing in a straight line.`,
      x: { min: 0, max: r.context_size, title: "Context length (tokens)" },
      y: { min: 0, max: kib(end.kv_bytes_read) * 1.08, title: "KiB read per step", format: (v) => String(Number(v.toPrecision(3))) },
      series: [{ points: rows.map((x) => [x.context, kib(x.kv_bytes_read)]), className: "kv-on", label: "cache on" }],
    }, width));
    dom.bytesCaption.textContent = `Keys and values a cached step reads: every earlier position, in every layer (${bytes(r.bytes_per_position)} per position). The new token’s query still looks at the whole history, so the reading grows with the context even though the computing does not.`;
    dom.costRows.replaceChildren(...rows.map((x) => {
      const tr = el("tr");
      const th = el("th", null, String(x.context));
      th.scope = "row";
      tr.append(th, el("td", "num", ms(x.cached_ms)), el("td", "num", ms(x.uncached_ms)), el("td", "num", `${x.speedup.toFixed(1)}×`),
        el("td", "num", bytes(x.kv_bytes_read)), el("td", "num", `1 / ${x.positions_computed_uncached}`));
      return tr;
    }));
  }

  return {
    ready() {
      for (const c of [dom.preset, ...Object.values(inputs), dom.costRun]) c.disabled = false;
      fillPresetFromDefaults();
    },
    liveUpdate: updateLive,
    /** Set a preset, or numbers of one's own (the preset becomes "Your own numbers"), as the
     * learner would; resolves with Python's answer. */
    set({ preset = null, ...numbers } = {}) {
      if (preset != null) {
        dom.preset.value = chosen = preset;
        fillPreset(preset);
      }
      for (const [name, value] of Object.entries(numbers)) {
        inputs[name].value = String(value);
        dom.preset.value = chosen = "";
      }
      clearTimeout(timer);
      return compute();
    },
  };

  // Python's defaults for the calculator (the worked example's shape), before any preset.
  function fillPresetFromDefaults() {
    for (const [f, value] of Object.entries(defaults())) inputs[f].value = value;
    compute();
  }
}

