// Break it on purpose: one classic KV-cache bug injected at a time (Python's decodelab.lesson.bugs,
// through the endpoint break_it), the check that catches it run, and what went wrong said from
// its numbers. The padding bug runs the batch view's prompts.

import { batchGrid } from "./batch.js";
import { checkChart } from "./cache.js";
import { drawResponsive, sci, svg, verdict } from "../ui/plot.js";
import { $ } from "../ui/dom.js";
import { ask, el, fieldError, plural, tableHead } from "../ui/render.js";
import { modelOf } from "../state/settings.js";

const BUG_DEFAULT_PROMPTS = { names: "mar", prose: "The cache " };
const REAL_PROMPT = "The capital of France is"; // with the real model: an answer it knows
const REAL_STEPS = "8"; // and fewer steps: each is a full pass of the real model (Python caps them)

export function createBugs(app, batch) {
  const dom = {
    form: $("break-form"),
    bug: $("bug"),
    prompt: $("break-prompt"),
    steps: $("break-steps"),
    run: $("break-run"),
    status: $("break-status"),
    out: $("break-out"),
    verdict: $("break-verdict"),
    detail: $("break-detail"),
    explain: $("break-explain"),
    sentence: $("break-sentence"),
    course: $("break-course"),
    section: $("break"),
  };
  let promptTouched = false;
  let stepsTouched = false;
  let busy = false;

  // Errors about the test prompt and the steps go next to them; anything else (the dataset,
  // the batch prompts of the padding bug) next to the bug selector, where the learner is.
  function showError(name, message) {
    const control = { test_prompt: dom.prompt, check_steps: dom.steps }[name] || dom.bug;
    const box = $(`${control.id}-error`);
    const text = control === dom.bug && message && name !== "bug" && box.textContent && !box.hidden
      ? `${box.textContent} ${message}` : message;
    fieldError(control, text, box);
  }

  function clearErrors() {
    for (const name of ["bug", "test_prompt", "check_steps"]) showError(name, null);
  }

  // the workbench's model is the real one (Python says which is: setup's models)
  const real = () => Boolean((modelOf(app.info(), app.settings().model) || {}).pretrained);

  function defaultPrompt() {
    if (real() && !stepsTouched) dom.steps.value = REAL_STEPS;
    if (promptTouched) return;
    dom.prompt.value = real() ? REAL_PROMPT : BUG_DEFAULT_PROMPTS[app.settings().dataset] || "";
  }
  dom.steps.addEventListener("input", () => { stepsTouched = true; });
  dom.prompt.addEventListener("input", () => { promptTouched = true; });
  app.onSetting("dataset", defaultPrompt);
  app.onSetting("model", defaultPrompt);

  function markBug() {
    dom.section.dataset.bug = dom.bug.value;
    dom.form.classList.toggle("is-broken", dom.bug.value !== "none");
  }
  dom.bug.addEventListener("change", markBug);

  dom.form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (busy) return;
    clearErrors();
    const steps = Number(dom.steps.value);
    const request = {
      bug: dom.bug.value,
      dataset: app.settings().dataset,
      tokenizer: app.settings().tokenizer, // the lab's model reads the tokens the workbench's does
      model: real() ? app.settings().model : "transformer", // the real model, once loaded
      test_prompt: dom.prompt.value,
      check_steps: dom.steps.value.trim() === "" || !Number.isFinite(steps) ? dom.steps.value : steps,
      seed: Number(app.settings().seed) || 0,
    };
    if (request.bug === "unmasked-padding") request.prompts = batch.prompts();
    busy = true;
    dom.status.textContent = request.bug === "none" ? "Running the check on the correct cache…" : "Running the check with the bug injected…";
    const reply = await ask(app, "break_it", request, dom.run, "bug");
    busy = false;
    if (!reply.ok) {
      dom.status.textContent = "";
      for (const e of reply.errors || []) showError(e.field, e.message);
      app.last.breakIt = reply;
      return;
    }
    app.last.breakIt = reply;
    show(reply);
  });

  function show(r) {
    dom.out.hidden = false;
    const failed = r.check === "cache" ? !r.cache.ok : !r.batch.ok;
    const what = r.check === "cache" ? "live cache check" : "batch check";
    dom.out.dataset.result = failed ? "failed" : "passed";
    if (r.check === "cache") {
      const c = r.cache;
      const first = c.per_step.findIndex((d) => d > c.tolerance);
      if (failed) {
        verdict(dom.verdict, false, `${r.label}: the ${what} failed from step ${first + 1} on.`,
          `Largest difference ${sci(c.max_abs_diff)}; the tolerance is ${sci(c.tolerance)}.`);
      } else {
        verdict(dom.verdict, true, `No bug: the ${what} passed at all ${plural(c.steps, "step", "steps")}.`,
          `Largest difference ${sci(c.max_abs_diff)}; the tolerance is ${sci(c.tolerance)}.`);
      }
      const figure = el("figure", "plot");
      const box = el("div", "plot-box");
      const caption = el("figcaption", null, `Per step, the largest difference between the logits of the ${r.bug === "none" ? "correct" : "broken"} cached run and a full recomputation of the same text (log scale). Crosses mark steps above the tolerance.`);
      figure.append(box, caption);
      dom.detail.replaceChildren(...(r.answers ? [answers(r)] : []), ...(r.rotations ? [dials(r.rotations)] : []), figure, checkTable(c));
      drawResponsive(box, (width) => checkChart(c.per_step, { width, tolerance: c.tolerance }));
    } else {
      const b = r.batch;
      const badRows = b.rows.filter((row) => !row.ok).length;
      verdict(dom.verdict, false, `${r.label}: the ${what} failed for ${plural(badRows, "row", "rows")} of ${b.rows.length}.`,
        `Largest difference from the same prompt run alone ${sci(b.max_abs_diff)}; the tolerance is ${sci(b.tolerance)}.`);
      dom.detail.replaceChildren(batchGrid(b, { caption: "The batch with the padding left visible: each row’s cache slots and its difference from the same prompt run alone" }));
    }
    dom.explain.hidden = !r.what_went_wrong;
    dom.sentence.textContent = r.what_went_wrong || "";
    dom.course.textContent = r.course; // what this check did, step by step, from its numbers
    dom.status.textContent = failed ? "The check failed, as it should with this bug." : "The check passed.";
  }

  // What the model writes after the test prompt, greedy, with the correct cache and with the
  // broken one: the bug as a reader meets it. The same text is possible (the logits moved, but
  // not which token is likeliest), and then the check is the only witness.
  function answers(r) {
    const box = el("div", "break-answers");
    const flat = (text) => text.replace(/\n/g, "⏎"); // a line break as a mark: one line each
    const line = (label, text, cls) => {
      const p = el("p", cls);
      p.append(el("strong", null, label), " ", el("span", "break-answer", `“${flat(r.test_prompt)}`), el("mark", null, flat(text)), el("span", "break-answer", "”"));
      return p;
    };
    box.append(line("The correct cache writes:", r.answers.correct, "break-correct"));
    if (r.answers.broken != null) {
      box.append(line("With the bug:", r.answers.broken, "break-broken"));
      if (r.answers.broken === r.answers.correct) {
        box.append(el("p", "break-same", "The same text: this bug moved the logits, but not far enough to change which token is likeliest at these steps. Reading the text would not catch it; the check does."));
      }
    }
    return box;
  }

  // The frozen position as angles: per decode step, the fastest pair of the new key's channels
  // turned as its own position (solid) and as the frozen one (dashed). Python's numbers.
  function dials(rot) {
    const figure = el("figure", "dials");
    const row = el("div", "dial-row");
    const R = 34;
    const hand = (deg, cls) => {
      const a = (deg * Math.PI) / 180;
      return svg("line", { x1: 40, y1: 40, x2: 40 + R * Math.cos(a), y2: 40 - R * Math.sin(a), class: cls });
    };
    for (const d of rot.rows) {
      const off = d.right !== d.used;
      const card = el("div", off ? "dial is-off" : "dial");
      const pic = svg("svg", { viewBox: "0 0 80 80", width: 80, height: 80, role: "img",
        "aria-label": `Step ${d.step}: should be turned ${Math.round(d.right_deg)} degrees, was turned ${Math.round(d.used_deg)}` });
      pic.append(svg("circle", { cx: 40, cy: 40, r: R, class: "dial-face" }),
        hand(d.right_deg, "dial-right"), ...(off ? [hand(d.used_deg, "dial-used")] : []),
        svg("circle", { cx: 40, cy: 40, r: 2.5, class: "dial-pin" }));
      const words = el("p", "dial-words");
      words.append(el("strong", null, `Step ${d.step}`), el("br"),
        el("span", null, `position ${d.right}: ${Math.round(d.right_deg)}°`), el("br"),
        off ? el("span", "dial-bad", `turned as ${d.used}: ${Math.round(d.used_deg)}°`) : el("span", "dial-ok", "turned right"));
      card.append(pic, words);
      row.append(card);
    }
    const cap = el("figcaption");
    cap.append(el("strong", null, "Positions are rotations. "), rot.sentence);
    figure.append(row, cap);
    return figure;
  }

  function checkTable(c) {
    const details = el("details", "kv-table");
    details.append(el("summary", null, "The check as a table"));
    const wrap = el("div", "table-wrap");
    const table = el("table", "data-table kv-data");
    table.append(el("caption", null, `Largest |cached − recomputed| logit at each step, tolerance ${sci(c.tolerance)}`));
    const thead = tableHead(["Step", "|difference|", "Verdict"]);
    const tbody = el("tbody");
    c.per_step.forEach((d, i) => {
      const tr = el("tr", d > c.tolerance ? "is-bad" : null);
      const th = el("th", null, String(i + 1));
      th.scope = "row";
      tr.append(th, el("td", "num", sci(d)), el("td", null, d > c.tolerance ? "✕ above" : "✓ within"));
      tbody.append(tr);
    });
    table.append(thead, tbody);
    wrap.append(table);
    details.append(wrap);
    return details;
  }

  return {
    ready() {
      for (const c of [dom.bug, dom.prompt, dom.steps, dom.run]) c.disabled = false;
      defaultPrompt();
      markBug();
    },
    /** Run the check with this bug (and test prompt), as its form does; resolves with the answer. */
    async check({ bug, prompt } = {}) {
      if (bug != null) {
        dom.bug.value = bug;
        markBug();
      }
      if (prompt != null) dom.prompt.value = prompt;
      const before = app.last.breakIt;
      dom.form.requestSubmit();
      while (busy || !app.last.breakIt || app.last.breakIt === before) await new Promise((r) => setTimeout(r, 20));
      return app.last.breakIt;
    },
  };
}
