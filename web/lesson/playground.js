// The playground: type a few logits or probabilities and see the decoding rules work on them,
// stage by stage. The numbers go to the same Python as generation (decodelab.lesson.pipeline),
// which checks them and answers with every stage; errors appear next to the field they concern.

import { el, fieldError, pct, tableHead } from "../ui/render.js";
import { PipelineView } from "./stages.js";
import { $ } from "../ui/dom.js";

// Worked examples (the numbers tests/test_sampling.py checks): each fills the form and shows the
// result at once.
export const PRESETS = {
  temperature: { label: "[2, 1] at T = 0.5, 1, 2", kind: "logits", values: "2, 1", temperature: 1, top_k: 0, top_p: 1, min_p: 0, order: "temperature-first", u: "0.8", sweep: "0.5, 1, 2" },
  top_p: { label: "[0.6, 0.25, 0.15] with top-p 0.8", kind: "probs", values: "0.6, 0.25, 0.15", temperature: 1, top_k: 0, top_p: 0.8, min_p: 0, order: "temperature-first", u: "0.75", sweep: "0.5, 1, 2" },
  orders: { label: "The same at T = 2: the orders differ", kind: "probs", values: "0.6, 0.25, 0.15", temperature: 2, top_k: 0, top_p: 0.8, min_p: 0, order: "temperature-first", u: "0.75", sweep: "1, 2" },
  topk_topp: { label: "Top-k 3, then top-p 0.75", kind: "probs", values: "0.4, 0.3, 0.2, 0.1", temperature: 1, top_k: 3, top_p: 0.75, min_p: 0, order: "temperature-first", u: "0.5", sweep: "" },
  min_p: { label: "Min-p 0.2", kind: "probs", values: "0.5, 0.3, 0.15, 0.05", temperature: 1, top_k: 0, top_p: 1, min_p: 0.2, order: "temperature-first", u: "0.9", sweep: "" },
};

// Python's field name -> the control that shows its error.
const FIELD_CONTROL = {
  logits: "pg-values", probs: "pg-values", temperature: "pg-temperature", top_k: "pg-top-k",
  top_p: "pg-top-p", min_p: "pg-min-p", order: "pg-order", u: "pg-u", sweep: "pg-sweep",
  greedy: "pg-temperature",
};

export function createPlayground(app) {
  const { call } = app;
  const section = $("playground");
  const form = $("pg-form");
  const out = $("pg-out");
  const outEmpty = $("pg-empty");
  const status = $("pg-status");
  const sweepBox = $("pg-sweep-out");
  const controls = {
    values: $("pg-values"), temperature: $("pg-temperature"), top_k: $("pg-top-k"),
    top_p: $("pg-top-p"), min_p: $("pg-min-p"), order: $("pg-order"), u: $("pg-u"),
    sweep: $("pg-sweep"),
  };
  const kindRadios = [...form.querySelectorAll("input[name=pg-kind]")];
  const view = new PipelineView($("pg-view"), {
    prefix: "pg",
    noun: "candidate",
    caption: (d, order) => `Your ${d.rows.length} numbers at each stage (${order})`,
    used: { sentence: "Your setting is", mark: "your setting" },
  });
  let ready = false;
  let seq = 0;
  let timer = null;

  // --- presets -----------------------------------------------------------------------------------

  const presetBox = $("pg-presets");
  for (const [key, preset] of Object.entries(PRESETS)) {
    const button = el("button", "chip-button", preset.label);
    button.type = "button";
    button.dataset.preset = key;
    button.disabled = true;
    presetBox.append(button);
  }
  presetBox.addEventListener("click", (event) => {
    const button = event.target.closest("[data-preset]");
    if (button) load(PRESETS[button.dataset.preset]);
  });

  function load(preset) {
    for (const radio of kindRadios) radio.checked = radio.value === preset.kind;
    controls.values.value = preset.values;
    for (const name of ["temperature", "top_k", "top_p", "min_p", "order", "u", "sweep"]) {
      controls[name].value = String(preset[name]);
    }
    for (const button of presetBox.querySelectorAll("[data-preset]")) {
      button.setAttribute("aria-pressed", String(PRESETS[button.dataset.preset] === preset));
    }
    return compute();
  }

  // --- computing ------------------------------------------------------------------------------------

  function readRequest() {
    const kind = (kindRadios.find((r) => r.checked) || kindRadios[0]).value;
    return {
      [kind]: controls.values.value,
      temperature: controls.temperature.value,
      top_k: controls.top_k.value,
      top_p: controls.top_p.value,
      min_p: controls.min_p.value,
      order: controls.order.value,
      u: controls.u.value,
      sweep: controls.sweep.value,
    };
  }

  function showErrors(errors) {
    const byControl = {};
    for (const e of errors || []) {
      const id = FIELD_CONTROL[e.field];
      if (id) (byControl[id] = byControl[id] || []).push(e.message);
    }
    for (const control of Object.values(controls)) {
      const messages = byControl[control.id];
      fieldError(control, messages ? messages.join(" ") : null);
      const ids = [`${control.id}-hint`, messages ? `${control.id}-error` : null].filter((id) => id && $(id));
      control.setAttribute("aria-describedby", ids.join(" "));
    }
  }

  async function compute() {
    if (!ready) return null;
    const mine = ++seq;
    section.dataset.state = "computing";
    let reply;
    try {
      reply = await call("explain_values", readRequest());
    } catch (err) {
      if (mine !== seq) return null;
      status.textContent = `Python could not compute this: ${err.message}`;
      section.dataset.state = "error";
      return null;
    }
    if (mine !== seq) return null; // a newer request is on its way
    const data = reply;
    if (!data.ok) {
      showErrors(data.errors);
      status.textContent = "Fix the field marked above; the last good result stays below.";
      section.dataset.state = "invalid";
      return data;
    }
    showErrors([]);
    status.textContent = "";
    view.show(data);
    drawSweep(data);
    outEmpty.hidden = true;
    out.hidden = false;
    section.dataset.state = "ready";
    return data;
  }

  function drawSweep(data) {
    if (!data.sweep || !data.sweep.length) {
      sweepBox.hidden = true;
      sweepBox.replaceChildren();
      return;
    }
    const table = el("table", "data-table pg-sweep-table");
    table.append(el("caption", null, "The final probabilities at each temperature (with the filters above)"));
    const thead = tableHead(["Candidate", ...data.sweep.map((s) => (s.greedy ? "T = 0 (greedy)" : `T = ${Number(s.temperature)}`))]);
    const tbody = el("tbody");
    data.rows.forEach((row, i) => {
      const tr = el("tr");
      const th = el("th", "pl-tok", row.token_text);
      th.scope = "row";
      tr.append(th);
      for (const s of data.sweep) {
        const td = el("td", s.kept[i] ? "pl-cell is-alive" : "pl-cell is-cut");
        const line = el("div", "pl-line");
        const track = el("span", "pl-bar final");
        const fill = el("span", "pl-fill");
        fill.style.setProperty("--w", `${s.p[i] * 100}%`);
        track.append(fill);
        line.append(track, el("span", "pl-n", s.kept[i] ? pct(s.p[i]) : "✕ removed"));
        td.append(line);
        tr.append(td);
      }
      tbody.append(tr);
    });
    table.append(thead, tbody);
    const head = el("h3", "pg-sub", "Compared across temperatures");
    const wrap = el("div", "table-wrap");
    wrap.append(table);
    sweepBox.replaceChildren(head, wrap);
    sweepBox.hidden = false;
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(timer);
    compute();
  });
  form.addEventListener("input", () => {
    for (const button of presetBox.querySelectorAll("[data-preset]")) button.setAttribute("aria-pressed", "false");
    clearTimeout(timer);
    timer = setTimeout(compute, 300);
  });

  return {
    ready() {
      ready = true;
      for (const c of form.elements) c.disabled = false;
      for (const button of presetBox.querySelectorAll("[data-preset]")) button.disabled = false;
      return load(PRESETS.temperature);
    },
    load: (key) => load(PRESETS[key]),
    /** Fill the playground with these probabilities and settings (used by the questions). */
    try(preset) {
      const result = load({ ...PRESETS.temperature, sweep: "", ...preset });
      app.show(section);
      controls.values.focus({ preventScroll: true });
      return result;
    },
  };
}
