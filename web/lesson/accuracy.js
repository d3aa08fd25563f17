// Right answers against temperature: the tasks model asked held-out questions at several
// temperatures (decodelab.lesson.accuracy), drawn as accuracy with its 95% interval per
// temperature, a table with the same numbers, what the numbers allow one to say, and some wrong
// answers.
// Python makes a batch of runs per request, so progress shows and Stop works between batches.

import { createPlanned } from "./planned.js";
import { svg } from "../ui/plot.js";
import { el, foldedList, pct, plural, tableHead } from "../ui/render.js";
import { $ } from "../ui/dom.js";
import { realModel } from "../state/settings.js";
const W = 420;
const H = 190;
const PAD = { left: 44, right: 16, top: 14, bottom: 30 };

function tLabel(row) {
  return row.greedy ? "T = 0 (greedy)" : `T = ${Number(row.temperature)}`;
}

/** Accuracy with its interval at each temperature: a dot and a bar per column. */
export function accuracyChart(rows) {
  const x = (i) => PAD.left + ((W - PAD.left - PAD.right) / rows.length) * (i + 0.5);
  const y = (v) => PAD.top + (1 - v) * (H - PAD.top - PAD.bottom);
  const words = rows.map((r) => `${tLabel(r)}: ${pct(r.accuracy)} (95% interval ${pct(r.low)} to ${pct(r.high)})`).join("; ");
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `Share of right answers. ${words}.`, class: "acc-svg" });
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    chart.append(svg("line", { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), class: "xp-grid" }));
    chart.append(svg("text", { x: PAD.left - 6, y: y(v) + 4, class: "xp-axis", "text-anchor": "end" }, `${v * 100}%`));
  }
  rows.forEach((r, i) => {
    chart.append(svg("text", { x: x(i), y: H - 10, class: "xp-axis", "text-anchor": "middle" }, r.greedy ? "T 0" : `T ${Number(r.temperature)}`));
    if (r.accuracy == null) return;
    const g = svg("g", { class: `xp-t${i % 6}` });
    g.append(svg("line", { x1: x(i), x2: x(i), y1: y(r.high), y2: y(r.low), class: "xp-whisker" }));
    for (const v of [r.low, r.high]) g.append(svg("line", { x1: x(i) - 7, x2: x(i) + 7, y1: y(v), y2: y(v), class: "xp-whisker" }));
    g.append(svg("circle", { cx: x(i), cy: y(r.accuracy), r: 5, class: "xp-dot" }));
    g.append(svg("text", { x: x(i) + 10, y: y(r.accuracy) + 4, class: "xp-value" }, pct(r.accuracy)));
    chart.append(g);
  });
  return chart;
}

/** addRow(words, cells): a row of the table body, its head cell the words. */
function rowAdder(tbody) {
  return (words, cells) => {
    const tr = el("tr");
    const th = el("th", null, words);
    th.scope = "row";
    tr.append(th, ...cells.map((c) => el("td", null, c)));
    tbody.append(tr);
  };
}

function table(result, label) {
  const t = el("table", "data-table xp-table");
  const engine = result.engine ? `, on the ${label(result.engine)} engine` : "";
  t.append(el("caption", null, `${plural(result.questions, "question", "questions")} (${result.asked}), ${plural(result.samples, "sample", "samples")} each (one at T = 0), at most ${result.budget} new tokens per run${engine}`));
  const tbody = el("tbody");
  const addRow = rowAdder(tbody);
  const rows = result.rows;
  addRow("Right answers", rows.map((r) => `${r.correct} of ${r.runs}`));
  addRow("Accuracy", rows.map((r) => pct(r.accuracy)));
  addRow("95% interval (Wilson)", rows.map((r) => `${pct(r.low)} to ${pct(r.high)}`));
  addRow("Ran out of budget", rows.map((r) => pct(r.length_share)));
  if (result.tools) addRow("Tool call not readable", rows.map((r) => pct(r.malformed_share)));
  t.append(tableHead(["", ...rows.map(tLabel)]), tbody);
  return t;
}

/** The same plan on the real model's two engines (Python's engines_compared): a column per
 * temperature, each engine's right answers with their interval, and the runs answered alike. */
export function enginesTable(both, label) {
  const t = el("table", "data-table xp-table acc-engines");
  t.append(el("caption", null, `The same ${plural(both.runs, "run", "runs")} on both engines`));
  const tbody = el("tbody");
  const addRow = rowAdder(tbody);
  for (const engine of both.engines) {
    addRow(label(engine), both.rows.map((r) => `${r[engine].correct} of ${r.runs} (${pct(r[engine].low)} to ${pct(r[engine].high)})`));
  }
  addRow("The same answer, word for word", both.rows.map((r) => `${r.alike} of ${r.runs}`));
  t.append(tableHead(["", ...both.rows.map((r) => tLabel({ greedy: r.temperature === 0, temperature: r.temperature }))]), tbody);
  return t;
}

function wrongAnswers(result) {
  const items = result.rows.flatMap((row) => row.wrong.slice(0, 2).map((w) => [
    el("span", "acc-t", `${tLabel(row)}: `), `${w.question} `, el("span", "acc-said", w.answer ? `“${w.answer}”` : "(no answer)"),
    ` (right: ${w.expected}${w.finish_reason === "length" ? "; the budget ran out" : ""})`,
  ]));
  return foldedList("Some wrong answers", items, "None: every run was right.");
}

export function createAccuracy({ call }) {
  const box = $("accuracy");
  const section = $("tool-calls");
  const form = $("acc-form");
  const inputs = { model: $("acc-model"), temperatures: $("acc-temps"), questions: $("acc-questions"), samples_per_question: $("acc-samples"), max_new_tokens: $("acc-budget"), tools: $("acc-tools") };
  const status = $("acc-status");
  const results = $("acc-results");
  const asked = $("acc-asked");
  let models = {}; // model -> what Python says of the experiment on it (webapi catalog "accuracy")
  let engines = []; // the real model's engines as Python offers them ({id, label})
  const engineLabel = (id) => (engines.find((e) => e.id === id) || { label: id }).label;

  // the form for the chosen model: what it is asked, how that is graded, its own defaults,
  // and the calculator only where the model was trained to call it
  function fit(fill) {
    const about = models[inputs.model.value];
    if (!about) return;
    asked.textContent = `${about.who} is asked ${about.asked}: ${about.graded}.`;
    inputs.tools.closest(".field").hidden = !about.tools;
    if (!fill) return;
    for (const [name, value] of Object.entries(about.defaults)) {
      if (inputs[name]) inputs[name].value = String(value);
    }
  }
  inputs.model.addEventListener("change", () => fit(true));

  function render(result) {
    const figure = el("figure", "acc-chart");
    const cap = el("figcaption");
    cap.append(el("strong", null, "Share of right answers at each temperature. "), "Dots are the measured share; bars are 95% Wilson intervals, where the true share probably lies given this many runs.");
    figure.append(cap, accuracyChart(result.rows));
    const wrap = el("div", "table-wrap");
    wrap.append(table(result, engineLabel));
    const say = el("p", "xp-takeaway", result.findings.map((f) => f.text).join(" "));
    const parts = [say, figure, wrap];
    if (result.engines) { // the same plan run before on the other engine
      const both = el("div", "table-wrap");
      both.append(enginesTable(result.engines, engineLabel));
      parts.push(el("p", "xp-takeaway acc-engines-said", result.engines.text), both);
    } else if (result.engine) {
      parts.push(el("p", "hint acc-engines-hint", "Read the model for the other engine on its card (chapter 1) and run the same experiment again: the two are then set side by side."));
    }
    results.replaceChildren(...parts, wrongAnswers(result));
  }

  const planned = createPlanned({
    call, endpoints: ["accuracy_start", "accuracy_advance"], box, inputs, status, results, render,
    runButton: $("acc-run"), stop: $("acc-cancel"), progress: $("acc-progress"),
    request: () => {
      const settings = { model: inputs.model.value, max_new_tokens: inputs.max_new_tokens.value };
      if (models[inputs.model.value]?.tools) settings.tools = inputs.tools.value;
      return {
        temperatures: inputs.temperatures.value,
        questions: inputs.questions.value,
        samples_per_question: inputs.samples_per_question.value,
        settings,
      };
    },
  });

  return {
    ready(info) {
      models = info.accuracy || {};
      engines = info.pretrained?.engines?.choices || [];
      const on = Boolean(info.datasets && info.datasets.tasks && info.datasets.tasks.tools);
      // without the tasks model only the real model can be asked (once it is loaded)
      if (!on) inputs.model.value = Object.keys(models).find((m) => m !== "transformer") || inputs.model.value;
      for (const option of inputs.model.options) option.disabled = !(option.value in models) || (option.value === "transformer" && !on);
      fit(true);
      for (const c of form.elements) c.disabled = false;
      if (!on) status.textContent = `This site was built without the tasks model; ${(realModel(info) || {}).name || "the real model"} can still be asked.`;
      box.dataset.state = "idle";
      if (section) section.dataset.state = "idle";
    },
    start: planned.start,
    last: planned.last,
  };
}
