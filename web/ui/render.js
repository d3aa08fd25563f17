// Small helpers that turn step records into readable words and DOM nodes.
// User and model text only ever goes into the page through textContent.

import { onScreen } from "../embed/presence.js";
import { el } from "./dom.js";

export { el };

export const EOS_LABEL = "<eos>";

/** A token as a learner can read it: space as ␣, newline as ⏎, end-of-sequence as "end". */
export function readable(tokenText) {
  if (tokenText === EOS_LABEL) return "end";
  let out = "";
  for (const ch of String(tokenText)) {
    const code = ch.codePointAt(0);
    if (ch === " ") out += "␣";
    else if (ch === "\n") out += "⏎";
    else if (ch === "\t") out += "⇥";
    else if (code < 0x20 || code === 0x7f) out += `U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
    else out += ch;
  }
  return out;
}

/** How a token is named in a sentence: “a”, “␣” (space), end-of-sequence. */
export function spoken(tokenText) {
  if (tokenText === EOS_LABEL) return "end-of-sequence";
  const names = { " ": "space", "\n": "newline", "\t": "tab" };
  const name = names[tokenText];
  return name ? `${quoted(tokenText)} (${name})` : quoted(tokenText);
}

const BLANK_NAMES = { " ": ["space", "spaces"], "\n": ["newline", "newlines"], "\t": ["tab", "tabs"] };

/** The blank characters of a text by name, runs counted: "space", "2 newlines, space". */
function blanks(text) {
  const runs = [];
  for (const ch of text) {
    const last = runs.at(-1);
    if (last && last[0] === ch) last[1] += 1;
    else runs.push([ch, 1]);
  }
  return runs.map(([ch, n]) => (n === 1 ? BLANK_NAMES[ch][0] : `${n} ${BLANK_NAMES[ch][1]}`)).join(", ");
}

/** What a screen reader should say for a token in the text, or null when its characters read
 * as they are: the blanks a reader would skip, named, and the word itself heard (“␣the”:
 * "space, the"; “ma␣”: "ma, then space"; “␣”: "space"). */
export function tokenName(text) {
  const m = /^([ \n\t]*)([\s\S]*?)([ \n\t]*)$/.exec(String(text));
  const [, lead, word, trail] = m;
  if (!lead && !trail) return null;
  if (!word) return blanks(lead);
  return [lead && blanks(lead), word, trail && `then ${blanks(trail)}`].filter(Boolean).join(", ");
}

/** A text in quotes, readable as a token is: “ma␣”. */
export function quoted(text) {
  return `“${readable(text)}”`;
}

/** A probability as a percentage with one decimal; tiny but non-zero values say so. */
export function pct(p) {
  if (p == null || Number.isNaN(p)) return "–";
  if (p === 0) return "0%";
  if (p === 1) return "100%";
  if (p < 0.0005) return "<0.1%";
  if (p > 0.9995 && p < 1) return ">99.9%";
  return `${(p * 100).toFixed(1)}%`;
}

export function fixed(x, digits) {
  return x == null || Number.isNaN(x) ? "–" : Number(x).toFixed(digits);
}

export function seconds(ms) {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** A count as the page writes it: 49,152, not 49152. */
export function count(n) {
  return Number(n).toLocaleString("en");
}

export function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

/**
 * How sure a step was, as the lesson tells it: the chance the chosen token had and the entropy of
 * what it was drawn from. Greedy has no draw (its final distribution is all on one token), so
 * there it is the model's own: the chance the model gave the argmax, and the model's entropy.
 */
export function stepOdds(step, greedy) {
  return greedy
    ? { p: Math.exp(step.logprob), entropy: step.entropy_raw, whose: "the model’s own" }
    : { p: step.prob, entropy: step.entropy, whose: "after the rules" };
}

/**
 * The workbench's settings for a panel that runs them (checked by Python as Generate's are), or
 * null after saying in the panel's status line that some need fixing (each error is then shown
 * next to its field).
 */
export async function formSettings(app, status) {
  const result = await app.collect();
  if (!result.errors) return result.settings;
  // the words point at the fields only where every one at fault is on the screen
  status.textContent = Object.keys(result.errors).every((name) => onScreen("controls", name))
    ? "Some settings above need fixing first: see the messages next to them."
    : `This widget's settings cannot be used: ${Object.values(result.errors).join(" ")}`;
  return null;
}

/** A message next to its control (in the control's -error box, or `box`), or none; the
 * control, when there is one, says it is invalid while the message shows. */
export function fieldError(control, message, box = document.getElementById(`${control.id}-error`)) {
  box.textContent = message || "";
  box.hidden = !message;
  if (message) control?.setAttribute("aria-invalid", "true");
  else control?.removeAttribute("aria-invalid");
}

/**
 * Ask Python from a panel's button: the button is off while the request runs, and a worker that
 * failed comes back as an answer with one error on `field`, so a panel handles one shape.
 */
export async function ask(app, endpoint, request, button, field) {
  button.disabled = true;
  try {
    return await app.call(endpoint, request);
  } catch (err) {
    return { ok: false, errors: [{ field, message: `Something went wrong in Python: ${err.message}` }] };
  } finally {
    button.disabled = false;
  }
}

/** A folded list of a few examples ("Some wrong answers"): each item's parts in a line of its
 * own, or the words `none` when there are none. */
export function foldedList(summary, items, none) {
  const box = el("details", "acc-wrong");
  box.append(el("summary", null, summary));
  const list = el("ul");
  for (const parts of items) {
    const li = el("li");
    li.append(...parts);
    list.append(li);
  }
  if (!list.childElementCount) list.append(el("li", null, none));
  box.append(list);
  return box;
}

/** A table's header: one row of column headers, each given as text or as a <th>. */
export function tableHead(items) {
  const row = el("tr");
  for (const item of items) {
    const th = typeof item === "string" ? el("th", null, item) : item;
    th.scope = "col";
    row.append(th);
  }
  const thead = el("thead");
  thead.append(row);
  return thead;
}

export function finishSentence(finishReason, stopReason, maxNewTokens) {
  if (finishReason === "stop" && stopReason === "eos") return "Stopped at end-of-sequence.";
  if (finishReason === "stop" && stopReason != null) return `Stopped at stop string “${readable(stopReason)}”.`;
  if (finishReason === "length") {
    return `Hit the limit of ${plural(maxNewTokens, "new token", "new tokens")}: the output may be incomplete.`;
  }
  if (finishReason === "cancelled") return "Stopped by you.";
  if (finishReason === "tool_calls" && stopReason === "tool_call_limit") return "Stopped: the model asked for more tool calls than one run may make.";
  if (finishReason === "tool_calls") return "Stopped at a tool call: tool calls are off, so the call is shown and not run.";
  return "Finished.";
}

/** The same ending as the trace and the command line write it: "finish_reason stop · stop_reason eos". */
export function finishCode(finishReason, stopReason) {
  const code = stopReason === "eos" || finishReason === "tool_calls"; // a name, not a stop string
  const stop = stopReason == null ? "null" : code ? stopReason : `“${readable(stopReason)}”`;
  return `finish_reason ${finishReason} · stop_reason ${stop}`;
}

/** One bar cell of the candidates table: a bar, then the number beside it. */
function barCell(p, kind, removed) {
  const td = el("td", `bar-cell ${kind}`);
  const cell = el("div", "cell");
  const bar = el("span", "bar");
  const fill = el("span", "fill");
  fill.style.setProperty("--w", `${Math.max(0, Math.min(1, p || 0)) * 100}%`);
  bar.append(fill);
  cell.append(bar, el("span", "num", removed ? "removed" : pct(p)));
  td.append(cell);
  if (removed) td.classList.add("is-removed");
  return td;
}

/**
 * Rows of the candidates table for one step record.
 * Removed candidates are struck through and hatched and say "removed"; the chosen one has a
 * marker, bold text and the word "chosen", so colour is never the only cue.
 */
export function candidateRows(step, greedy) {
  return step.top.map((c) => {
    const chosen = c.token_id === step.token_id;
    const removed = !c.kept && !greedy;
    const tr = el("tr");
    if (chosen) tr.classList.add("chosen");
    if (removed) tr.classList.add("removed");
    const th = el("th", "tok-cell");
    th.scope = "row";
    th.append(el("span", "marker", chosen ? "▸" : ""));
    th.append(el("span", "tok-label", readable(c.token_text)));
    if (chosen) th.append(el("span", "badge", "chosen"));
    tr.append(th, barCell(c.p_raw, "raw", false), barCell(c.p_temp, "temp", false), barCell(c.p_final, "final", removed));
    return tr;
  });
}

/**
 * The draw pictured: kept tokens laid end to end in id order, with u marked. Only possible when
 * every kept token is among the recorded candidates; returns null otherwise.
 */
export function drawSegments(step) {
  if (step.u == null) return null;
  const kept = step.top.filter((c) => c.kept && c.p_final > 0);
  if (kept.length !== step.kept_count) return null;
  kept.sort((a, b) => a.token_id - b.token_id);
  let start = 0;
  return kept.map((c) => {
    const seg = { token: c, start, width: c.p_final, chosen: c.token_id === step.token_id };
    start += c.p_final;
    return seg;
  });
}

/**
 * The draw as a strip (the step inspector and the pipeline): parts [{width, label, chosen}] laid
 * end to end, each as wide as its probability, and u marked on them. Fills `strip` and returns
 * it. Labels only where a part is wide enough to hold one.
 */
export function fillDrawStrip(strip, parts, u) {
  const segs = parts.map(({ width, label, chosen }) => {
    const seg = el("span", chosen ? "seg chosen" : "seg");
    seg.style.setProperty("--w", `${width * 100}%`);
    if (width > 0.045) seg.textContent = readable(label);
    return seg;
  });
  const marker = el("span", "u-marker");
  marker.style.setProperty("--at", `${u * 100}%`);
  marker.append(el("span", "u-label", "u"));
  strip.replaceChildren(...segs, marker);
  return strip;
}
