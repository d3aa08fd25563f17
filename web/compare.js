// Both models side by side: the settings of the form (checked the same way Generate checks
// them) run once with the bigram and once with the transformer, the same prompt, seed and rules
// (webapi.compare). Every difference in the two texts comes from the model.

import { el, finishSentence, fixed, pct, plural } from "./render.js";
import { sci } from "./plot.js";

const $ = (id) => document.getElementById(id);

const TITLES = { bigram: "Bigram", transformer: "Transformer" };
const HOW = {
  bigram: "Reads only the last character: its scores are the log-frequencies of what followed it in the training text.",
  transformer: "Reads every earlier character through attention, keeping their keys and values in the KV cache.",
};

function column(kind, run, info, settings) {
  const card = el("article", `card compare-col compare-${kind}`);
  const id = `compare-${kind}-title`;
  card.setAttribute("aria-labelledby", id);
  const title = el("h3", null, TITLES[kind]);
  title.id = id;
  card.append(title, el("p", "compare-how", HOW[kind]));
  const text = el("p", "text compare-text");
  text.append(el("span", "prompt-text", run.prompt), el("span", "gen-text", run.text));
  card.append(text, el("p", "compare-finish", finishSentence(run.finish_reason, run.stop_reason, settings.max_new_tokens)));
  const stats = el("dl", "stats compare-stats");
  const facts = [
    ["Steps", String(run.steps)],
    ["Average chance", pct(run.mean_prob)],
    ["Average entropy", run.mean_entropy == null ? "–" : `${fixed(run.mean_entropy, 2)} nats`],
    ["Held-out loss", info.val_nll == null ? "–" : `${fixed(info.val_nll, 2)} nats`],
    ["Parameters", run.params == null ? "–" : run.params.toLocaleString("en")],
  ];
  if (kind === "transformer" && run.cache_ok != null) {
    facts.push(["Cache check", `${run.cache_ok ? "✓" : "✕"} ${sci(run.cache_max_diff)}`]);
  }
  stats.append(...facts.map(([term, value]) => {
    const div = el("div", "stat");
    div.append(el("dt", null, term), el("dd", null, value));
    return div;
  }));
  card.append(stats);
  return card;
}

export function createCompare(app) {
  const dom = { run: $("compare-run"), status: $("compare-status"), out: $("compare-out"), note: $("compare-note") };
  let busy = false;

  dom.run.addEventListener("click", async () => {
    if (busy) return;
    const result = app.collect();
    if (result.errors) {
      dom.status.textContent = "Some settings above need fixing first: see the messages next to them.";
      return;
    }
    const settings = { ...result.settings };
    delete settings.model;
    busy = true;
    dom.run.disabled = true;
    dom.status.textContent = "Running the bigram, then the transformer…";
    let reply;
    try {
      reply = (await app.request({ type: "kv-compare", settings })).result;
    } catch (err) {
      reply = { ok: false, errors: [{ message: `Something went wrong in Python: ${err.message}` }] };
    } finally {
      busy = false;
      dom.run.disabled = false;
    }
    app.last.compare = reply;
    if (!reply.ok) {
      dom.status.textContent = (reply.errors || []).map((e) => e.message).join(" ");
      return;
    }
    const d = (app.info().datasets || {})[reply.settings.dataset] || {};
    const infos = {
      bigram: { val_nll: typeof d.val_nll === "object" && d.val_nll ? d.val_nll.bigram : d.val_nll },
      transformer: { val_nll: d.transformer ? d.transformer.val_nll : null },
    };
    dom.out.replaceChildren(...["bigram", "transformer"].map((k) => column(k, reply.runs[k], infos[k], reply.settings)));
    dom.out.hidden = false;
    const s = reply.settings;
    const how = s.greedy || Number(s.temperature) === 0 ? "greedy" : `seed ${s.seed}, temperature ${s.temperature}`;
    dom.note.textContent = `Same prompt, ${how}, same filters and stop rules, ${plural(s.max_new_tokens, "new token", "new tokens")} at most. A lower held-out loss means the model found real text less surprising.`;
    dom.note.hidden = false;
    dom.status.textContent = "Done.";
  });

  return {
    ready() {
      dom.run.disabled = false;
    },
  };
}
