// The runs kept for comparing: the last few finished runs of the workbench, and any two of them
// side by side. The settings that differ are listed; each text is marked from the first step
// where the two runs chose differently (same seed, T = 0.3 against T = 2 is the classic: the
// draws u are the same, the distributions are not).

import { el, finishSentence, readable } from "../ui/render.js";
import { $ } from "../ui/dom.js";

const KEEP = 8; // runs kept
const SHOWN = 1500; // characters of each text shown side by side

/** The settings that differ between two runs, as [label, left, right]. */
export function settingsDiff(a, b, specs) {
  const out = [];
  for (const [name, spec] of Object.entries(specs)) {
    if (!(name in a) && !(name in b)) continue;
    const x = JSON.stringify(a[name]);
    const y = JSON.stringify(b[name]);
    if (x !== y) out.push([spec.label, shownValue(a[name]), shownValue(b[name])]);
  }
  return out;
}

function shownValue(v) {
  if (Array.isArray(v)) return v.length ? v.map((s) => `“${readable(s)}”`).join(" ") : "none";
  if (typeof v === "string") return v === "" ? "(empty)" : v;
  return String(v);
}

/** The first step at which two runs chose different tokens (or one ended), or null. */
export function firstDifference(a, b) {
  const n = Math.max(a.tokens.length, b.tokens.length);
  for (let i = 0; i < n; i++) {
    if (!a.tokens[i] || !b.tokens[i] || a.tokens[i].id !== b.tokens[i].id) return i;
  }
  return null;
}

export function createRuns(app) {
  const dom = { empty: $("runs-empty"), body: $("runs-body"), a: $("runs-a"), b: $("runs-b"), out: $("runs-compare") };
  const kept = [];
  let count = 0;

  function label(run) {
    const s = run.settings;
    let rule = run.greedy ? "greedy" : `T = ${Number(s.temperature)}`; // Python's word: greedy, or T = 0
    if (s.strategy === "beam") rule = `beam search, ${s.num_beams} beams`; // from the chapter Beam search and drafts
    else if (s.draft && s.draft !== "off") rule += `, ${s.draft} draft`;
    return `Run ${run.number}: ${s.model}, ${s.dataset}, seed ${s.seed}, ${rule}`;
  }

  function fill(select, value) {
    select.replaceChildren(...kept.map((run) => Object.assign(el("option", null, label(run)), { value: String(run.number) })));
    if (value != null && kept.some((r) => r.number === value)) select.value = String(value);
  }

  function byNumber(select) {
    return kept.find((r) => String(r.number) === select.value) || null;
  }

  // The text in at most three pieces (the part both runs share, the part from where they parted,
  // and what was left out), not a node per character: two runs of thousands of steps each would
  // otherwise put tens of thousands of nodes on the page for the browser to lay out.
  function column(run, from) {
    const box = el("article", "runs-col");
    box.append(el("h3", null, label(run)));
    const text = el("p", "runs-text");
    if (run.settings.prompt) text.append(el("span", "prompt-text", run.settings.prompt));
    const chars = run.tokens.map((t) => (t.text === "<eos>" ? "" : t.text));
    const cut = from == null ? chars.length : Math.min(from, chars.length);
    const same = chars.slice(0, cut).join("");
    const parted = chars.slice(cut).join("");
    const room = Math.max(0, SHOWN - same.length);
    text.append(same.slice(0, SHOWN));
    if (parted && room) text.append(el("span", "runs-parted", parted.slice(0, room)));
    const left = same.length + parted.length - SHOWN;
    if (left > 0) text.append(el("span", "runs-more", ` … and ${left} more characters`));
    box.append(text, el("p", "runs-finish", finishSentence(run.finish.finish_reason, run.finish.stop_reason, run.settings.max_new_tokens)));
    return box;
  }

  function render() {
    const a = byNumber(dom.a);
    const b = byNumber(dom.b);
    if (!a || !b) return;
    const specs = Object.fromEntries((app.info().fields || []).map((f) => [f.name, f]));
    const diff = settingsDiff(a.settings, b.settings, specs);
    const from = firstDifference(a, b);
    const head = el("div", "runs-head");
    if (!diff.length) head.append(el("p", null, "These two runs have the same settings."));
    else {
      const list = el("ul", "runs-diff");
      for (const [name, x, y] of diff) list.append(el("li", null, `${name}: ${x} → ${y}`));
      head.append(el("p", null, "The settings that differ:"), list);
    }
    let where;
    if (from == null) where = "They chose the same token at every step.";
    else if (from === 0) where = "They differ from the very first step (marked).";
    else where = `They chose the same ${from === 1 ? "first token" : `first ${from} tokens`}, then parted ways at step ${from + 1} (marked).`;
    head.append(el("p", "runs-from", where));
    const grid = el("div", "runs-grid");
    grid.append(column(a, from), column(b, from));
    dom.out.replaceChildren(head, grid);
    dom.out.dataset.first = from == null ? "" : String(from);
  }

  dom.a.addEventListener("change", render);
  dom.b.addEventListener("change", render);

  return {
    /** A finished run of the workbench, or a search of the chapter Beam search and drafts (its best path, or
     * the text the draft helped write): keep it (the oldest goes past KEEP). */
    add(run) {
      if (!run.finish) return; // a run cut off by a failure is not kept
      count += 1;
      kept.push({
        number: count,
        settings: { ...run.settings },
        greedy: run.greedy,
        finish: { ...run.finish },
        tokens: run.steps.map((s) => ({ id: s.token_id, text: s.token_text, prob: s.prob })),
      });
      if (kept.length > KEEP) kept.shift();
      const left = kept.length > 1 ? kept[kept.length - 2].number : kept[0].number;
      fill(dom.a, left);
      fill(dom.b, kept[kept.length - 1].number);
      dom.empty.hidden = true;
      dom.body.hidden = false;
      render();
    },
    /** Show these two runs (numbers as kept) side by side. */
    show(a, b) {
      dom.a.value = String(a);
      dom.b.value = String(b);
      render();
    },
    get kept() {
      return kept;
    },
  };
}
