// When the answer has a shape: one card question answered four ways side by side (webapi
// shapes: a generous budget, a tight one, hot sampling without and with JSON mode), each answer
// classified in words; and the experiment of valid JSON against budget and temperature, with
// and without JSON mode (decodelab.lesson.shapes), as a table with intervals and what it shows.

import { createPlanned } from "./planned.js";
import { el, fieldError, finishCode, foldedList, pct, plural, tableHead } from "../ui/render.js";
import { $ } from "../ui/dom.js";

const STATUS_WORDS = { valid: "Valid JSON", incomplete: "Incomplete", malformed: "Malformed" };

function howRun(settings) {
  const bits = [settings.greedy ? "greedy" : `T = ${settings.temperature}`, `${settings.max_new_tokens} new tokens at most`];
  if (settings.json_mode) bits.push("JSON mode");
  return bits.join(" · ");
}

function wayCard(way) {
  const card = el("article", "shape-way");
  card.dataset.status = way.json.status;
  const verdict = el("p", "json-verdict", way.json.status === "valid"
    ? `${STATUS_WORDS.valid}${way.right ? ", and the values are right." : `, but ${way.wrong}.`}`
    : `${STATUS_WORDS[way.json.status]}: ${way.json.error}.`);
  verdict.dataset.status = way.json.status;
  card.append(
    el("h4", null, way.title),
    el("p", "shape-how", howRun(way.settings)),
    el("pre", "shape-answer", way.answer || "(nothing)"),
    verdict,
    el("p", "shape-finish", `${plural(way.steps, "step", "steps")} · ${finishCode(way.finish_reason, way.stop_reason)}`),
  );
  return card;
}

function cellWords(c) {
  return c.runs ? `${pct(c.valid_share)} (${pct(c.low)} to ${pct(c.high)})` : "–";
}

function validityTable(result) {
  const t = el("table", "data-table xp-table validity-table");
  t.append(el("caption", null, `${plural(result.cards, "held-out card", "held-out cards")}, ${plural(result.samples, "sample", "samples")} each (one at T = 0); valid share with its 95% Wilson interval, then the shares cut by the budget and malformed`));
  const head = tableHead(["Budget", "T", "Without JSON mode: valid", "cut", "malformed", "With JSON mode: valid", "cut", "malformed"]);
  const tbody = el("tbody");
  const pairs = new Map();
  for (const c of result.cells) {
    const key = `${c.budget}|${c.temperature}`;
    if (!pairs.has(key)) pairs.set(key, {});
    pairs.get(key)[c.json_mode ? "on" : "off"] = c;
  }
  for (const { off, on } of pairs.values()) {
    const tr = el("tr");
    const th = el("th", null, String(off.budget));
    th.scope = "row";
    tr.append(th, el("td", null, off.greedy ? "0 (greedy)" : String(off.temperature)));
    for (const c of [off, on]) {
      tr.append(el("td", "num", cellWords(c)), el("td", "num", pct(c.incomplete / c.runs)), el("td", c.malformed ? "num is-bad" : "num", pct(c.malformed / c.runs)));
    }
    tbody.append(tr);
  }
  t.append(head, tbody);
  return t;
}

function examples(result) {
  const items = result.cells.flatMap((c) => c.examples.slice(0, 1).map((x) => [
    el("span", "acc-t", `${c.budget} tokens, ${c.greedy ? "greedy" : `T = ${c.temperature}`}${c.json_mode ? ", JSON mode" : ""}: `), el("code", null, x.answer || "(nothing)"), ` ${x.status}: ${x.error}.`,
  ]));
  return foldedList("Some answers that were not valid", items, "None: every answer was valid.");
}

export function createShapes({ call }) {
  const section = $("shapes");
  const question = $("shapes-question");
  const runButton = $("shapes-run");
  const status = $("shapes-status");
  const out = $("shapes-out");
  const errorBox = $("shapes-question-error");
  const box = $("validity");
  const form = $("validity-form");
  const inputs = { temperatures: $("validity-temps"), budgets: $("validity-budgets"), cards: $("validity-cards"), samples_per_question: $("validity-samples") };
  let lastWays = null;

  const questionError = (message) => fieldError(question, message, errorBox);

  async function compare() {
    runButton.disabled = true;
    questionError(null);
    status.textContent = "Running the model four times…";
    try {
      const r = await call("shapes", { question: question.value, seed: 0 });
      if (!r.ok) {
        const mine = (r.errors || []).find((e) => e.field === "question");
        if (mine) {
          questionError(mine.message);
          status.textContent = "Fix the question above.";
          question.focus();
        } else status.textContent = (r.errors || []).map((e) => e.message).join(" ");
        return null;
      }
      lastWays = r;
      out.replaceChildren(...r.ways.map(wayCard));
      out.hidden = false;
      status.textContent = "";
      return r;
    } catch (err) {
      status.textContent = `It could not run: ${err.message}`;
      return null;
    } finally {
      runButton.disabled = false;
    }
  }

  const results = $("validity-results");
  const planned = createPlanned({
    call, endpoints: ["validity_start", "validity_advance"], box, inputs, results, rate: ["answer", "answers"],
    runButton: $("validity-run"), stop: $("validity-cancel"), progress: $("validity-progress"), status: $("validity-status"),
    request: () => ({
      temperatures: inputs.temperatures.value, budgets: inputs.budgets.value,
      cards: inputs.cards.value, samples_per_question: inputs.samples_per_question.value,
    }),
    render(result) {
      const wrap = el("div", "table-wrap");
      wrap.append(validityTable(result));
      results.replaceChildren(el("p", "xp-takeaway", result.findings.map((f) => f.text).join(" ")), wrap, examples(result));
    },
  });

  $("shapes-form").addEventListener("submit", (event) => {
    event.preventDefault();
    compare();
  });

  return {
    ready(info) {
      const on = Boolean(info.datasets && info.datasets.tasks && info.datasets.tasks.tools && info.sample_card);
      if (on && !question.value) question.value = info.sample_card;
      const d = info.validity_defaults || {};
      for (const [name, control] of Object.entries(inputs)) if (d[name] != null) control.value = String(d[name]);
      for (const c of [...form.elements, question, runButton]) c.disabled = !on;
      if (!on) status.textContent = "This site was built without the tasks model’s cards.";
      section.dataset.state = "idle";
      box.dataset.state = "idle";
    },
    compare,
    start: planned.start,
    last: () => ({ ways: lastWays, validity: planned.last() }),
  };
}
