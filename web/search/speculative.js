// Speculative decoding round by round (Python's lesson.search.speculative_lesson, through the
// endpoint speculate): the workbench's settings with the bigram or the n-gram draft. Drawn: the text
// with each token marked by how it came (a kept guess, drawn from max(0, p − q), the model's
// extra token), every round's guesses with p, q, the draw u and the decision, the cache going
// forward for the check and back to what was kept; then the acceptance experiment (repeated
// samples, intervals, progress and Stop, through lesson/planned.js).

import { installSearchExports } from "./exports.js";
import { createPlayer } from "./play.js";
import { createPlanned } from "../lesson/planned.js";
import { sci, verdict } from "../ui/plot.js";
import { $ } from "../ui/dom.js";
import { createSearchAsk } from "./ask.js";
import { mirrorSettings } from "../ui/mirror.js";
import { el, finishSentence, fixed, pct, plural, readable, tableHead } from "../ui/render.js";

const FIELDS = { draft: "spec-draft", num_draft_tokens: "spec-gamma" };
const HOW = { accepted: "a guess the model kept", resampled: "drawn from max(0, p − q)", bonus: "the model’s extra token" };
// greedy, nothing is drawn: after a guess turned down the model puts its own likeliest token
const HOW_GREEDY = { ...HOW, resampled: "the model’s own likeliest token, in place of the guess" };

/** How a token of a speculative run came, in words (greedy rounds draw nothing). */
export function howWords(source, greedy) {
  return (greedy ? HOW_GREEDY : HOW)[source];
}

/** One guess as a chip: its token, p and q, and what the draw decided. */
export function guessWords(t, greedy) {
  const ratio = t.ratio == null ? "–" : fixed(t.ratio, 2);
  if (greedy) return t.accepted ? "kept: it is the model’s likeliest token too" : "turned down: the model’s likeliest token is another";
  return `p ${pct(t.p)} / q ${pct(t.q)} = ${ratio}; u ${fixed(t.u, 3)} ${t.accepted ? "<" : "≥"} ${ratio}: ${t.accepted ? "kept" : "turned down"}`;
}

/** The cache of one round: its length before, while checking, and after the rollback. */
export function cacheWords([before, checked, after]) {
  return `Cache: ${plural(before, "position", "positions")}, ${checked} while the model checks, ${after} kept${after < checked ? ` (${checked - after} taken back)` : ""}.`;
}

function cacheBar([before, checked, after], window) {
  const bar = el("span", "spec-cache");
  bar.setAttribute("aria-hidden", "true");
  const w = (n) => `${(100 * n) / window}%`;
  const kept = el("span", "spec-cache-kept");
  kept.style.setProperty("--w", w(after));
  const tried = el("span", "spec-cache-tried");
  tried.style.setProperty("--w", w(checked));
  const was = el("span", "spec-cache-before");
  was.style.setProperty("--w", w(before));
  bar.append(tried, kept, was);
  return bar;
}

export function createSpeculative(app) {
  const dom = {
    form: $("spec-form"), run: $("spec-run"), status: $("spec-status"), out: $("spec-out"),
    summary: $("spec-summary"), text: $("spec-text"), round: $("spec-round"), roundOut: $("spec-round-out"),
    rounds: $("spec-rounds"), check: $("spec-check"), section: $("speculative"),
    legendResampled: $("spec-legend-resampled"),
  };
  const controls = Object.fromEntries(Object.entries(FIELDS).map(([name, id]) => [name, $(id)]));
  mirrorSettings(app.store, { prompt: $("spec-prompt"), dataset: $("spec-dataset"), temperature: $("spec-temperature"),
    max_new_tokens: $("spec-budget"), greedy: $("spec-greedy") }, "speculative");
  const search = createSearchAsk({ app, controls, form: dom.form, section: dom.section, status: dom.status, button: dom.run,
    stop: $("spec-stop"), out: dom.out,
    endpoint: "speculate", key: "draft", working: "Decoding with the draft…", show });
  const exports = installSearchExports("spec", app, search.own, "speculative");
  let shown = null;

  function summary(reply) {
    const t = reply.trace;
    const rate = t.acceptance_rate == null ? "no guesses were made" : `${pct(t.acceptance_rate)} of the draft’s guesses were kept`;
    const same = reply.greedy
      ? (t.ids.length === reply.plain.ids.length && t.ids.every((id, i) => id === reply.plain.ids[i])
        ? "Greedy, the text is the model’s own, token for token: the same as without the draft."
        : "Greedy, the text should equal the model’s own, and here it does not: that would be a bug.")
      : "Sampled, each token is drawn as likely as the model alone would draw it; the text differs from the run without the draft only because the random numbers fall at other places.";
    return `${plural(t.rounds.length, "round", "rounds")}, ${plural(t.ids.length, "token", "tokens")} from ${plural(t.target_passes, "pass", "passes")} of the model (${fixed(t.tokens_per_pass, 2)} tokens per pass; one without a draft): ${rate}. ${same} ${finishSentence(t.finish_reason, t.stop_reason, t.settings.max_new_tokens)}`;
  }

  function drawRounds(r) {
    const { trace } = shown;
    dom.roundOut.value = String(r);
    dom.roundOut.textContent = String(r);
    const steps = trace.steps.filter((s) => s.round <= r);
    const text = [el("span", "prompt-text", trace.prompt)];
    // the latest round's guess that was turned down stays in view, struck, where it was tried
    const rejected = (trace.rounds[r] || { tokens: [] }).tokens.find((t) => !t.accepted);
    for (const s of steps) {
      if (rejected && s.round === r && s.source === "resampled") {
        const tried = el("span", "spec-tok is-rejected", rejected.token_text === "<eos>" ? "" : rejected.token_text);
        tried.title = `Round ${r}: the draft’s guess, turned down`;
        text.push(tried);
      }
      const span = el("span", `spec-tok is-${s.source}${s.round === r ? " is-latest" : ""}`, s.token_text === "<eos>" ? "" : s.token_text);
      span.title = `Round ${s.round}: ${howWords(s.source, shown.greedy)}`;
      text.push(span);
    }
    dom.text.replaceChildren(...text);
    const window = trace.rounds.reduce((m, x) => Math.max(m, ...x.cache), 1);
    dom.rounds.replaceChildren(...trace.rounds.slice(0, r + 1).map((x, i) => {
      const li = el("li", `spec-round${i === r ? " is-latest" : ""}`);
      const chips = el("p", "spec-chips");
      chips.append(el("span", "spec-round-name", `Round ${i}`));
      for (const t of x.tokens) {
        const chip = el("span", `spec-chip ${t.accepted ? "is-accepted" : "is-rejected"}`, readable(t.token_text));
        chip.title = guessWords(t, shown.greedy);
        chips.append(chip);
      }
      const extra = "resampled" in x ? "resampled" : "bonus";
      const last = trace.steps.find((s) => s.round === i && s.source === extra);
      if (last) chips.append(el("span", `spec-chip is-${extra}`, readable(last.token_text)));
      li.append(chips);
      const words = el("ul", "spec-words");
      for (const t of x.tokens) words.append(el("li", null, `${readable(t.token_text)}: ${guessWords(t, shown.greedy)}`));
      const untried = x.proposed - x.tokens.length;
      if (untried > 0) words.append(el("li", null, `The draft proposed ${plural(x.proposed, "guess", "guesses")}: the ${untried === 1 ? "last was" : `last ${untried} were`} never checked, because the model stops at the first it turns down. The share of guesses kept counts ${untried === 1 ? "it" : "them"} as not kept.`));
      if (last) words.append(el("li", null, `${readable(last.token_text)}: ${howWords(extra, shown.greedy)}.`));
      if (x.kept < x.accepted + (last ? 1 : 0)) words.append(el("li", null, `The text ended inside this round: ${plural(x.kept, "token", "tokens")} of it kept.`));
      li.append(words);
      const cache = el("p", "spec-cache-line");
      cache.append(cacheBar(x.cache, window), el("span", null, cacheWords(x.cache)));
      li.append(cache);
      return li;
    }));
  }

  function render(reply) {
    shown = reply;
    const t = reply.trace;
    dom.summary.textContent = summary(reply);
    dom.legendResampled.textContent = howWords("resampled", reply.greedy);
    dom.round.max = String(Math.max(t.rounds.length - 1, 0));
    dom.round.value = dom.round.max;
    player.reset();
    drawRounds(t.rounds.length - 1);
    const diffs = t.rounds.filter((x) => x.cache_diff != null);
    dom.check.hidden = !diffs.length;
    if (diffs.length) {
      const ok = diffs.every((x) => x.cache_ok);
      verdict(dom.check, ok, ok ? "Cache check passed" : "Cache check failed",
        `Every round’s pass read a cache cut back after the round before; its logits equal a full recomputation of the text in ${diffs.length === 1 ? "its one round" : diffs.length === 2 ? "both rounds" : `all ${diffs.length} rounds`}: largest difference ${sci(Math.max(...diffs.map((x) => x.cache_diff)))}.`);
    } else if (reply.check_skipped) { // Python says why there is no check (the real model's cost)
      dom.check.hidden = false;
      dom.check.className = "kv-verdict";
      dom.check.textContent = reply.check_skipped;
    }
    dom.out.hidden = false;
  }

  const player = createPlayer(dom.round, $("spec-play"), (r) => shown && drawRounds(r));

  // a good reply: drawn, offered for export, and the text the draft helped write kept for Compare runs
  function show(reply) {
    render(reply);
    exports.show(reply.trace, reply.command);
    const t = reply.trace;
    if (app.keep) app.keep({ settings: t.settings, greedy: reply.greedy, finish: { finish_reason: t.finish_reason, stop_reason: t.stop_reason }, steps: t.steps });
  }

  // --- the acceptance experiment -------------------------------------------------------------

  const xp = {
    form: $("acc-spec-form"), results: $("spec-xp-results"),
    inputs: { gammas: $("spec-gammas"), temperatures: $("spec-temps"), spec_samples: $("spec-samples") },
  };

  function interval(s, show) {
    if (s.mean == null) return "–";
    return s.low == null ? show(s.mean) : `${show(s.mean)} [${show(Math.max(0, s.low))}, ${show(s.high)}]`;
  }

  function renderExperiment(result) {
    const table = el("table", "data-table kv-data spec-xp-table");
    const cap = el("caption", null, "Share of guesses kept, and tokens per pass of the model: mean over the runs, with a 95% interval [low, high] (mean ± 1.96 standard errors)");
    table.append(cap, tableHead(["Draft tokens", "Temperature", "Runs", "Guesses kept", "Tokens per pass"]));
    const body = el("tbody");
    for (const c of result.cells) {
      const tr = el("tr");
      const th = el("th", "num", String(c.gamma));
      th.scope = "row";
      tr.append(th, el("td", "num", c.temperature_words), el("td", "num", String(c.runs)),
        el("td", "num", interval(c.acceptance, pct)), el("td", "num", interval(c.tokens_per_pass, (x) => fixed(x, 2))));
      body.append(tr);
    }
    table.append(body);
    const wrap = el("div", "table-wrap");
    wrap.append(table);
    const best = result.cells.filter((c) => c.tokens_per_pass.mean != null).sort((a, b) => b.tokens_per_pass.mean - a.tokens_per_pass.mean)[0];
    const say = best
      ? `The most tokens per pass: ${fixed(best.tokens_per_pass.mean, 2)}, with ${plural(best.gamma, "draft token", "draft tokens")} at temperature ${best.temperature_words}. Longer drafts are kept less often: each guess must survive every guess before it.`
      : "No run made a guess.";
    xp.results.replaceChildren(el("p", "xp-takeaway", say), wrap);
  }

  const planned = createPlanned({
    call: app.call, endpoints: ["acceptance_start", "acceptance_advance"], box: xp.form, inputs: xp.inputs,
    status: $("spec-xp-status"), results: xp.results, render: renderExperiment,
    runButton: $("spec-xp-run"), stop: $("spec-xp-cancel"), progress: $("spec-xp-progress"),
    request: () => ({
      settings: app.store.values(),
      gammas: xp.inputs.gammas.value,
      temperatures: xp.inputs.temperatures.value,
      spec_samples: xp.inputs.spec_samples.value,
    }),
  });

  return {
    ready() {
      for (const c of [...dom.form.elements, ...xp.form.elements]) c.disabled = false;
      search.fromLink();
      // what Python says the page's experiment starts with
      const d = (app.info() || {}).acceptance_defaults || {};
      if (d.temperatures) xp.inputs.temperatures.value = d.temperatures;
    },
    run: search.run,
    runWith: search.runWith,
    experiment: planned.start,
    lastExperiment: planned.last,
  };
}
