// Beam search beside greedy and sampling (Python's lesson.search.beam_lesson, through the
// endpoint beam): the workbench's prompt and stop rules with this panel's beam settings. Drawn:
// the three texts with the model's own log-probability per token, the tree step by step with
// the candidates of the step and the cache rows copied after it, the finished paths ranked, and
// the cache check of every beam.

import { installSearchExports } from "./exports.js";
import { createPlayer } from "./play.js";
import { drawTree, fate, score } from "./tree.js";
import { sci, verdict } from "../ui/plot.js";
import { $ } from "../ui/dom.js";
import { createSearchAsk } from "./ask.js";
import { mirrorSettings } from "../ui/mirror.js";
import { el, finishSentence, pct, plural, readable } from "../ui/render.js";

const FIELDS = {
  num_beams: "beam-beams",
  num_return_sequences: "beam-return",
  length_penalty: "beam-penalty",
  no_repeat_ngram_size: "beam-ngram",
  early_stopping: "beam-early",
};
const TITLES = { beam: "Beam search, best path", greedy: "Greedy", sampled: "Sampled" };

/** A log-probability as the panel writes it: −0.55. */
export function logp(x) {
  return x == null ? "–" : x.toFixed(2).replace(/^-/, "−");
}

/** The cache rows copied after a step: "row 1 ← row 0" for each row, and the rows dropped. */
export function rowsSentence(from, step) {
  const moves = from.map((p, row) => `${row} ← ${p}`).join(", ");
  const dropped = from.map((_, row) => row).filter((row) => !from.includes(row));
  const shared = [...new Set(from.filter((p, i) => from.indexOf(p) !== i))];
  let out = `After step ${step}, each row of the cache takes the row of the beam it grew from (row ← row): ${moves}.`;
  if (shared.length) out += ` ${shared.length === 1 ? `Row ${shared[0]} is` : `Rows ${shared.join(", ")} are`} copied into more than one row: those beams share their past.`;
  if (dropped.length) out += ` ${dropped.length === 1 ? `Row ${dropped[0]}’s beam was` : `The beams of rows ${dropped.join(", ")} were`} pruned: overwritten.`;
  return out;
}

// Python's lesson.search.why decides why the best beam is or is not the likeliest per token;
// these are its words
const NAMED = { greedy: "greedy decoding’s text", sampled: "the sample" };
const named = (names) => names.map((name) => NAMED[name]).join(" and ");
const CAUSES = {
  no_repeat_ngram: (w) => `the ban on repeated ${w.no_repeat_ngram_size}-grams forbids the beams ${named(w.barred)}, which ${w.barred.length > 1 ? "each repeat" : "repeats"} one`,
  length_penalty: (w) => `a beam’s score is its summed log-probability (the sum of its tokens’ log-probabilities) divided by its length to the power of the length penalty (${w.length_penalty}), which can rank a longer or shorter path above one likelier per token`,
  narrow: (w) => `the search keeps only ${plural(w.num_beams, "path", "paths")} at each step, and the ${w.better.length > 1 ? "paths" : "path"} to ${named(w.better)} ${w.better.length > 1 ? "were" : "was"} dropped before ${w.better.length > 1 ? "they" : "it"} paid off`,
};

/** Log-probabilities written with as many decimals (2 at least, 6 at most) as it takes for
 * those that differ to read differently: −0.7185 and −0.7197, not −0.72 twice. */
export function logps(xs) {
  let digits = 2;
  const differ = (a, b) => a !== b && a.toFixed(6) !== b.toFixed(6);
  while (digits < 6 && xs.some((a, i) => xs.some((b, j) => j > i && differ(a, b) && a.toFixed(digits) === b.toFixed(digits)))) digits += 1;
  return xs.map((x) => (x == null ? "–" : x.toFixed(digits).replace(/^-/, "−")));
}

/** The search's summary in words: what it found beside greedy decoding and the sample, and why,
 * each number the reply's own. */
export function beamSummary(reply) {
  const w = reply.why;
  const found = w.found || [];
  // digits enough to tell apart the scores of different texts (a found one reads as the beam)
  const [beam, greedy, sampled] = logps(reply.side.map((s, i) => (i && found.includes(s.name) ? reply.side[0] : s).logprob_per_token));
  // the texts the search found itself are not compared with it: they are the best beam
  const others = [["greedy", `greedy ${greedy}`], ["sampled", `the sample ${sampled}`]].filter(([name]) => !found.includes(name)).map(([, words]) => words);
  const itself = found.length ? ` (${named(found)}: the same tokens)` : "";
  const scores = `${beam} per token${itself}${others.length ? `, ${others.join(" and ")}` : ""}`;
  const rest = ["greedy", "sampled"].filter((name) => !found.includes(name) && !w.same.includes(name));
  const how = !w.likelier
    ? `Here the best beam scores ${scores}: ${w.causes.map((c) => CAUSES[c](w)).join("; and ")}.`
    : found.length
      ? `The search found ${named(found)} itself: the best beam is the same tokens (${beam} per token), and no path it kept was likelier.${rest.length ? ` ${rest.map((name) => `${NAMED[name][0].toUpperCase()}${NAMED[name].slice(1)} scores ${name === "greedy" ? greedy : sampled}`).join("; ")}.` : ""}`
      : w.same.length
        ? `Here the best beam scores ${scores}: it is as likely per token as ${named(w.same)}, and the search found no likelier path.`
        : `The model finds the best beam likelier per token (${beam}) than greedy decoding’s text (${greedy}) and the sample (${sampled}): that is what the search is for.`;
  const lively = w.no_repeat_ngram_size
    ? "compare the repeated 3-grams."
    : "compare the repeated 3-grams, and try No repeat n-gram.";
  return `${plural(w.num_beams, "beam", "beams")}, ${plural(reply.trace.steps.length, "step", "steps")}; the search ended: ${reply.trace.stopped}. ${how} Likely text is not lively text: ${lively}`;
}

export function createBeam(app) {
  const dom = {
    form: $("beam-form"), run: $("beam-run"), status: $("beam-status"), out: $("beam-out"),
    summary: $("beam-summary"), side: $("beam-side"), step: $("beam-step"), stepOut: $("beam-step-out"),
    tree: $("beam-tree"), rows: $("beam-rows"), cands: $("beam-cand-rows"), candCaption: $("beam-cand-caption"),
    list: $("beam-list"), check: $("beam-check"), section: $("beam"),
  };
  const controls = Object.fromEntries(Object.entries(FIELDS).map(([name, id]) => [name, $(id)]));
  mirrorSettings(app.store, { prompt: $("beam-prompt"), dataset: $("beam-dataset"), max_new_tokens: $("beam-budget") }, "beam");
  const search = createSearchAsk({ app, controls, form: dom.form, section: dom.section, status: dom.status, button: dom.run,
    stop: $("beam-stop"), out: dom.out,
    endpoint: "beam", key: "beam", working: "Searching…", show });
  const exports = installSearchExports("beam", app, search.own, "beam");
  let shown = null;

  function card(side, reply) {
    const box = el("article", `card search-card search-${side.name}`);
    const s = reply.sampled;
    const title = side.name === "sampled" ? `Sampled (${s.greedy ? "greedy: the workbench’s rules draw nothing" : `seed ${s.seed}, temperature ${s.temperature}`})` : TITLES[side.name];
    box.append(el("h4", null, title));
    const text = el("p", "text search-text");
    text.append(el("span", "prompt-text", reply.trace.prompt), el("span", "gen-text", side.text));
    const stats = el("dl", "stats search-stats");
    // digits as the summary has them: a text the search found itself is the best beam's tokens,
    // and its score differs from the beam's only by rounding (float32 sums in another order)
    const found = reply.why.found || [];
    const shown = logps(reply.side.map((x, i) => (i && found.includes(x.name) ? reply.side[0] : x).logprob_per_token));
    for (const [term, value] of [["Log-probability per token", shown[reply.side.indexOf(side)]], ["Repeated 3-grams", pct(side.repeated_3gram)], ["Tokens", String(side.tokens)]]) {
      const div = el("div", "stat");
      div.append(el("dt", null, term), el("dd", null, value));
      stats.append(div);
    }
    box.append(text, stats, el("p", "search-finish", finishSentence(side.finish_reason, side.stop_reason, reply.trace.settings.max_new_tokens)));
    return box;
  }

  function drawStep(k) {
    const { trace, tree } = shown;
    dom.stepOut.value = String(k);
    dom.stepOut.textContent = String(k);
    const label = `The beam tree up to step ${k}: ${plural(tree.nodes[0].length, "beam", "beams")} per step; ${tree.finished.filter((f) => f.step <= k).length} finished so far.`;
    dom.tree.replaceChildren(drawTree(tree, k, readable, label));
    // the drawing ends at step k: on a narrow screen, keep that end in view as the slider moves
    dom.tree.scrollLeft = dom.tree.scrollWidth - dom.tree.clientWidth;
    const step = trace.steps[k];
    dom.rows.textContent = k < trace.steps.length - 1
      ? rowsSentence(tree.rows_from[k], k)
      : `Step ${k} is the last: the search ended (${trace.stopped}), so no row is copied.`;
    dom.candCaption.textContent = `The ${step.candidates.length} candidates at step ${k}: the best of every beam’s next tokens, by running score`;
    dom.cands.replaceChildren(...step.candidates.map((c) => {
      const tr = el("tr", fate(c, step) === "pruned" ? "is-pruned" : null);
      tr.append(el("td", "num", String(c.beam)), el("td", "mono", readable(c.token_text)), el("td", "num", score(c.score)), el("td", null, fate(c, step)));
      return tr;
    }));
  }

  function render(reply) {
    shown = reply;
    const { trace } = reply;
    dom.summary.textContent = beamSummary(reply);
    dom.side.replaceChildren(...reply.side.map((s) => card(s, reply)));
    dom.step.max = String(trace.steps.length - 1);
    dom.step.value = dom.step.max;
    player.reset();
    drawStep(trace.steps.length - 1);
    dom.list.replaceChildren(...trace.beams.map((b) => {
      const li = el("li", "beam-path");
      const text = el("p", "text search-text");
      text.append(el("span", "prompt-text", trace.prompt), el("span", "gen-text", b.text));
      li.append(text, el("p", "beam-path-facts", `Score ${score(b.score)} · log-probability ${logp(b.logprob)} over ${plural(b.ids.length, "token", "tokens")} (${logp(b.logprob_per_token)} per token) · ${finishSentence(b.finish_reason, b.stop_reason, trace.settings.max_new_tokens)}`));
      return li;
    }));
    const diffs = trace.steps.filter((s) => s.cache_diff != null);
    dom.check.hidden = !diffs.length;
    if (diffs.length) {
      const worst = Math.max(...diffs.map((s) => s.cache_diff));
      const ok = diffs.every((s) => s.cache_ok);
      verdict(dom.check, ok, ok ? "Cache check passed" : "Cache check failed",
        `At each of ${plural(diffs.length, "step", "steps")} after a reordering, every beam’s logits from its cache row were compared with a full recomputation of its text: largest difference ${sci(worst)}. The limit for this model, what rounding alone can make, is ${sci(trace.cache_tolerance)}.`);
    }
    dom.out.hidden = false;
  }

  const player = createPlayer(dom.step, $("beam-play"), (k) => shown && drawStep(k));

  // a good reply: drawn, offered for export, and its best path kept for Compare runs
  function show(reply) {
    render(reply);
    exports.show(reply.trace, reply.command);
    const best = reply.trace.beams[0];
    if (best && app.keep) {
      app.keep({ settings: reply.trace.settings, greedy: false, finish: { finish_reason: best.finish_reason, stop_reason: best.stop_reason },
        steps: best.ids.map((id, i) => ({ token_id: id, token_text: best.tokens[i], prob: null })) });
    }
  }

  return {
    ready() {
      for (const c of dom.form.elements) c.disabled = false;
      search.fromLink();
    },
    run: search.run,
    runWith: search.runWith,
  };
}
