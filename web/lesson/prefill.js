// "A forward pass is not yet a complete answer": the prompt's prefill, row by row. One forward
// pass over T tokens gives T rows of logits (a [B, T, V] tensor); every row but the last scores
// a token the prompt already has, and only the last one is used to choose the next token.
// Python computes the rows (decodelab.lesson.prefill); this module lays them out.

import { EOS_LABEL, ask, el, formSettings, pct, plural, readable, tableHead } from "../ui/render.js";
import { $ } from "../ui/dom.js";

function tokenCell(text, cls) {
  return el("td", `pf-tok ${cls || ""}`.trim(), readable(text));
}

function table(out) {
  const t = el("table", "pf-table");
  const [B, T, V] = out.shape;
  t.append(el("caption", null, `Logits of shape [${B}, ${T}, ${V}]: ${plural(T, "row", "rows")} from one forward pass, one per position`));
  t.append(tableHead(["Position", "Reads", "Likeliest next", "Actually next"]));
  const body = el("tbody");
  for (const row of out.rows) {
    const tr = el("tr", row.next == null ? "pf-last" : row.hit ? "pf-hit" : "");
    const th = el("th", "pf-pos", String(row.position));
    th.scope = "row";
    const top = tokenCell(row.top);
    top.append(el("span", "pf-p", pct(row.top_p)));
    let next;
    if (row.next == null) {
      next = el("td", "pf-choose", "not known yet: the decoding rules choose it from this row alone");
    } else {
      next = tokenCell(row.next, row.hit ? "pf-same" : "");
      next.append(el("span", "pf-p", row.hit ? `${pct(row.next_p)}, its first choice` : `${pct(row.next_p)}, its choice no. ${row.next_rank}`));
    }
    // the context starts with the end-of-sequence token: read first, it is the start mark
    const reads = row.position === 0 && row.reads === EOS_LABEL
      ? el("td", "pf-tok pf-start", "start") : tokenCell(row.reads);
    if (row.position === 0 && row.reads === EOS_LABEL) reads.title = "The end-of-sequence token: every text the model learned from began after one, so it marks the start too.";
    tr.append(th, reads, top, next);
    body.append(tr);
  }
  t.append(body);
  return t;
}

export function createPrefill(app) {
  const dom = { run: $("prefill-run"), status: $("prefill-status"), out: $("prefill-out") };
  let busy = false;
  dom.run.addEventListener("click", async () => {
    if (busy) return;
    busy = true;
    const chosen = await formSettings(app, dom.status);
    busy = false;
    if (!chosen) return;
    busy = true;
    dom.status.textContent = "One forward pass over the prompt…";
    const reply = await ask(app, "prefill", { settings: chosen }, dom.run, "settings");
    busy = false;
    app.last.prefill = reply;
    if (!reply.ok) {
      dom.status.textContent = (reply.errors || []).map((e) => e.message).join(" ");
      return;
    }
    const parts = [table(reply)];
    const hidden = reply.hidden_rows ? ` (the first ${plural(reply.hidden_rows, "row is", "rows are")} not shown)` : "";
    const words = reply.known
      ? `Of the ${plural(reply.known, "row", "rows")} whose next token is already in the prompt, the model’s first choice was that token in ${reply.hits}${hidden}. Those rows cost the same computation, but nothing is generated from them. Only the last row is about a token nobody knows yet.`
      : "The prompt is empty: the model has read only the start mark (the end-of-sequence token, which also begins every text it learned from), so there is a single row, and the first token comes from it.";
    parts.push(el("p", "pf-note", words));
    dom.out.replaceChildren(...parts);
    dom.out.hidden = false;
    dom.status.textContent = "Done.";
  });
  return {
    ready() {
      dom.run.disabled = false;
    },
  };
}
