// The batch view: several prompts of different lengths decoded together, left-padded, drawn
// slot by slot (padding, start, prompt, generated, and each real token's position), with each
// row's largest difference from the same prompt run alone. Python does the work
// (webapi.batch_view -> batch.batch_run); this module draws what comes back. batchGrid is also
// used by the "Break it on purpose" lab for the padding bug.

import { ask, el, fieldError, plural, readable, tableHead } from "../ui/render.js";
import { sci, verdict } from "../ui/plot.js";
import { $ } from "../ui/dom.js";

const DEFAULT_PROMPTS = {
  names: ["al", "mar", "kimberly"],
  prose: ["A ", "It is ", "The cache "],
};

function slotCell(slot) {
  if (slot.pad) {
    const td = el("td", "kv-slot kv-pad");
    td.append(el("span", "kv-tok", "pad"));
    return td;
  }
  const td = el("td", `kv-slot kv-${slot.kind}`);
  const start = slot.token === "<eos>";
  const tok = el("span", "kv-tok", start ? "⟨s⟩" : readable(slot.token));
  if (start) tok.title = "start of the sequence (the end-of-sequence token)";
  td.append(tok, el("span", "kv-pos", String(slot.pos)));
  return td;
}

/** The padded batch as a table: one row per prompt, one column per cache slot. */
export function batchGrid(result, { caption }) {
  const box = el("div", "kv-batch");
  const legend = el("p", "kv-legend");
  legend.setAttribute("aria-hidden", "true");
  for (const [cls, mark, words] of [["kv-pad", "pad", "padding (hidden by the mask)"], ["kv-start", "⟨s⟩", "start of the sequence"],
    ["kv-prompt", "a", "prompt"], ["kv-generated", "a", "generated"]]) {
    const item = el("span", "kv-legend-item");
    item.append(el("span", `kv-swatch ${cls}`, mark), words);
    legend.append(item);
  }
  legend.append(el("span", "kv-legend-item kv-legend-pos", "small numbers: each token’s position"));
  const wrap = el("div", "table-wrap kv-grid-wrap");
  const table = el("table", "kv-grid");
  table.append(el("caption", null, caption));
  const slots = Array.from({ length: result.columns }, (_, c) => {
    const th = el("th", "kv-colhead", String(c));
    th.setAttribute("aria-label", `slot ${c}`);
    return th;
  });
  const thead = tableHead([el("th", "kv-rowhead", "Prompt"), ...slots, el("th", "kv-checkhead", "vs alone")]);
  const tbody = el("tbody");
  result.rows.forEach((row, i) => {
    const tr = el("tr", row.ok ? "is-good" : "is-bad");
    const th = el("th", "kv-rowhead");
    th.scope = "row";
    th.append(el("span", "kv-rownum", `Row ${i + 1}`), el("span", "kv-rowprompt", row.prompt ? `“${readable(row.prompt)}”` : "(empty)"));
    tr.append(th, ...row.slots.map(slotCell));
    const verdict = el("td", "kv-rowcheck");
    verdict.append(el("span", "kv-ok-mark", row.ok ? "✓" : "✕"), ` ${sci(row.max_abs_diff)}`);
    tr.append(verdict);
    tbody.append(tr);
  });
  table.append(thead, tbody);
  wrap.append(table);
  const texts = el("ul", "kv-rowtexts");
  result.rows.forEach((row, i) => {
    const li = el("li");
    li.append(el("span", "kv-rownum", `Row ${i + 1}`), el("span", "prompt-text", row.prompt), el("span", "gen-text", row.generated),
      el("span", "kv-padcount", row.padding ? ` · ${plural(row.padding, "padding slot", "padding slots")}` : " · no padding"));
    texts.append(li);
  });
  box.append(legend, wrap, texts);
  return box;
}

export function createBatchView(app) {
  const dom = {
    form: $("batch-form"),
    prompts: $("batch-prompts"),
    steps: $("batch-steps"),
    run: $("batch-run"),
    status: $("batch-status"),
    out: $("batch-out"),
    verdict: $("batch-verdict"),
    grid: $("batch-grid"),
  };
  let touched = false;
  let busy = false;

  function defaults() {
    if (touched) return;
    dom.prompts.value = (DEFAULT_PROMPTS[app.settings().dataset] || DEFAULT_PROMPTS.names).join("\n");
  }
  dom.prompts.addEventListener("input", () => { touched = true; });
  app.onSetting("dataset", defaults);

  // the prompts as typed, one per line (empty lines left out); the padding bug runs them too
  const prompts = () => dom.prompts.value.split("\n").map((s) => s.replace(/\r$/, "")).filter((s) => s.length);

  function showError(name, message) {
    const control = name === "batch_steps" ? dom.steps : dom.prompts;
    const box = $(`${control.id}-error`);
    const text = message && !box.hidden && box.textContent && name !== "prompts" && name !== "batch_steps"
      ? `${box.textContent} ${message}` : message;
    fieldError(control, text, box);
  }

  dom.form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (busy) return;
    showError("prompts", null);
    showError("batch_steps", null);
    const steps = Number(dom.steps.value);
    const request = {
      dataset: app.settings().dataset,
      tokenizer: app.settings().tokenizer,
      prompts: prompts(),
      batch_steps: dom.steps.value.trim() === "" || !Number.isFinite(steps) ? dom.steps.value : steps,
      seed: Number(app.settings().seed) || 0,
    };
    busy = true;
    dom.status.textContent = "Running the batch and each prompt alone…";
    const reply = await ask(app, "batch_view", request, dom.run, "prompts");
    busy = false;
    app.last.batch = reply;
    if (!reply.ok) {
      dom.status.textContent = "";
      for (const e of reply.errors || []) showError(e.field, e.message);
      return;
    }
    dom.out.hidden = false;
    const padded = reply.rows.map((r, i) => (r.padding ? `row ${i + 1} has ${plural(r.padding, "padding slot", "padding slots")}` : null)).filter(Boolean);
    if (reply.max_abs_diff <= reply.tolerance) {
      verdict(dom.verdict, true, "Every row matches its prompt run alone.",
        `The largest difference in any logit over ${plural(reply.steps, "step", "steps")} is ${sci(reply.max_abs_diff)} (tolerance ${sci(reply.tolerance)}). Padding: ${padded.join(", ") || "none"}.`);
    } else {
      verdict(dom.verdict, false, "Some rows differ from their prompt run alone.",
        `By up to ${sci(reply.max_abs_diff)} (tolerance ${sci(reply.tolerance)}).`);
    }
    dom.grid.replaceChildren(batchGrid(reply, { caption: "The batch in the cache: each row’s slots, left-padded so that every row ends in the same column, and each row’s largest difference from the same prompt run alone" }));
    dom.status.textContent = `Done: ${plural(reply.rows.length, "row", "rows")}, ${plural(reply.steps, "step", "steps")}.`;
  });

  return {
    prompts,
    ready() {
      for (const c of [dom.prompts, dom.steps, dom.run]) c.disabled = false;
      defaults();
    },
  };
}
