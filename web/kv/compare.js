// Both models side by side: the settings of the form (checked the same way Generate checks
// them) run once with the bigram and once with the transformer, the same prompt, seed and rules
// (webapi.compare). Every difference in the two texts comes from the model.

import { ask, el, finishSentence, fixed, formSettings, pct, plural } from "../ui/render.js";
import { drawResponsive, lineChart, sci } from "../ui/plot.js";
import { $ } from "../ui/dom.js";

const TITLES = { bigram: "Bigram", transformer: "Transformer" };
const HOW = {
  bigram: (unit) => `Reads only the last ${unit}: its scores are the log-frequencies of what followed it in the training text.`,
  transformer: (unit) => `Reads every earlier ${unit} through attention, keeping their keys and values in the KV cache.`,
};

function column(kind, run, info, settings) {
  const card = el("article", `card compare-col compare-${kind}`);
  const id = `compare-${kind}-title`;
  card.setAttribute("aria-labelledby", id);
  const title = el("h3", null, TITLES[kind]);
  title.id = id;
  card.append(title, el("p", "compare-how", HOW[kind](settings.tokenizer === "bpe" ? "token" : "character")));
  const text = el("p", "text compare-text");
  text.append(el("span", "prompt-text", run.prompt), el("span", "gen-text", run.text));
  card.append(text, el("p", "compare-finish", finishSentence(run.finish_reason, run.stop_reason, settings.max_new_tokens)));
  const stats = el("dl", "stats compare-stats");
  const facts = [
    ["Steps", String(run.steps)],
    ["Average chance", pct(run.mean_prob)],
    ["Average entropy", run.mean_entropy == null ? "–" : `${fixed(run.mean_entropy, 2)} nats`],
    ["Held-out loss", info.val_nll == null ? "–" : `${fixed(info.val_nll, 2)} nats per ${settings.tokenizer === "bpe" ? "token" : "character"}`],
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

  dom.run.addEventListener("click", () => run());

  /** Run both models with the workbench's settings; resolves with Python's answer (or null). */
  async function run() {
    if (busy) return null;
    busy = true;
    const chosen = await formSettings(app, dom.status);
    busy = false;
    if (!chosen) return null;
    const settings = { ...chosen };
    delete settings.model;
    busy = true;
    dom.status.textContent = "Running the bigram, then the transformer…";
    const reply = await ask(app, "compare", settings, dom.run, "settings");
    busy = false;
    app.last.compare = reply;
    if (!reply.ok) {
      dom.status.textContent = (reply.errors || []).map((e) => e.message).join(" ");
      return reply;
    }
    const d = (app.info().datasets || {})[reply.settings.dataset] || {};
    // held-out losses of the models that ran: per character, or per token on BPE
    const tokens = reply.settings.tokenizer === "bpe" ? d.bpe : null;
    const infos = tokens ? {
      bigram: { val_nll: tokens.val_nll },
      transformer: { val_nll: tokens.transformer ? tokens.transformer.val_nll : null },
    } : {
      bigram: { val_nll: typeof d.val_nll === "object" && d.val_nll ? d.val_nll.bigram : d.val_nll },
      transformer: { val_nll: d.transformer ? d.transformer.val_nll : null },
    };
    dom.out.replaceChildren(...["bigram", "transformer"].map((k) => column(k, reply.runs[k], infos[k], reply.settings)));
    dom.out.hidden = false;
    const s = reply.settings;
    const how = reply.greedy ? "greedy" : `seed ${s.seed}, temperature ${s.temperature}`;
    dom.note.textContent = `Same prompt, ${how}, same filters and stop rules, ${plural(s.max_new_tokens, "new token", "new tokens")} at most. A lower held-out loss means the model found real text less surprising.`;
    dom.note.hidden = false;
    dom.status.textContent = "Done.";
    return reply;
  }

  // The transformer's training curve on the chosen dataset, with the bigram as a reference.
  function curve() {
    const name = app.settings().dataset;
    const d = ((app.info() || {}).datasets || {})[name] || {};
    const t = d.transformer;
    const c = t && t.curve;
    const has = Boolean(c && Array.isArray(c.step) && c.step.length);
    for (const id of ["curve-figure", "curve-table", "curve-lede"]) $(id).hidden = !has;
    $("curve-title").textContent = has ? `How the transformer learned: ${d.label || name}` : "How the transformer learned";
    if (!has) return;
    const bigram = typeof d.val_nll === "object" && d.val_nll ? d.val_nll.bigram : d.val_nll;
    const all = [...c.train, ...c.val, bigram || 0];
    const last = c.step.length - 1;
    const seconds = t.train_seconds ? `, in ${Math.round(t.train_seconds)} s` : "";
    drawResponsive($("curve-plot"), (width) => lineChart({
      label: `Training curve: after ${c.step[last]} steps the training loss is ${fixed(c.train[last], 2)} and the held-out loss ${fixed(c.val[last], 2)} nats per character; the bigram's held-out loss is ${fixed(bigram, 2)}.`,
      x: { min: 0, max: c.step[last], title: "Training step", integer: true },
      y: { min: Math.floor(Math.min(...all) * 2) / 2, max: Math.ceil(Math.max(...all) * 2) / 2, title: "Loss (nats)", format: (v) => v.toFixed(1) },
      series: [
        { points: c.step.map((s, i) => [s, c.train[i]]), className: "kv-train", marker: "none", label: "training", labelDy: c.train[last] > c.val[last] ? -8 : 18 },
        { points: c.step.map((s, i) => [s, c.val[i]]), className: "kv-on", label: "held-out", labelDy: c.train[last] > c.val[last] ? 18 : -8 },
      ],
      hlines: bigram == null ? [] : [{ y: bigram, className: "kv-reference", label: `bigram ${fixed(bigram, 2)}` }],
    }, width));
    $("curve-caption").textContent = `${t.params.toLocaleString("en")} parameters, ${t.n_layer} layers, ${t.n_head} query heads sharing ${t.n_kv_head} KV heads, context ${t.context_size}; ${c.step[last].toLocaleString("en")} steps${seconds}. Held-out loss ${fixed(t.val_nll, 3)} against the bigram’s ${fixed(bigram, 3)} nats per character.`;
    $("curve-rows").replaceChildren(...c.step.map((s, i) => {
      const tr = el("tr");
      const th = el("th", null, String(s));
      th.scope = "row";
      tr.append(th, el("td", "num", fixed(c.train[i], 3)), el("td", "num", fixed(c.val[i], 3)));
      return tr;
    }));
  }
  app.onSetting("dataset", curve);

  return {
    ready() {
      dom.run.disabled = false;
      curve();
    },
    run,
  };
}
