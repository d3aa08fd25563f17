// The generated text: the prompt (one span per token), every generated character in a span of
// the step that chose it, what is not shown (held back for a possible stop string while the run
// goes on, cut by one at the end), a tool call drawn as a calculator chip, and why the run
// stopped. Python says which step owns each character (the batches' flow, held and cut), so this
// module only draws; a click or the arrow keys on a character select its step.

import { $, el } from "./dom.js";
import { finishCode, finishSentence, plural, readable, seconds, tokenName } from "./render.js";
import { createTextStream } from "./textstream.js";

// A tool call and its result are not answer text: each of their tokens gets a span of its own,
// drawn as part of a calculator chip (the markers as "calculator(", ")" and " = ").
const PART_MARKS = { "<|call|>": "calculator(", "<|/call|>": ")", "<|result|>": " = ", "<|/result|>": "" };
// An answer meant to be JSON (JSON mode, or a card question), classified by Python at the end.
const VERDICTS = { valid: "Valid JSON: one complete object.", incomplete: "Incomplete JSON: ", malformed: "Malformed JSON: " };

export function createTextView(store) {
  const dom = {
    placeholder: $("text-placeholder"),
    text: $("text"),
    prompt: $("text-prompt"),
    gen: $("text-gen"),
    held: $("text-held"),
    cut: $("text-cut"),
    showTokens: $("show-tokens"),
    finish: $("finish"),
    finishText: $("finish-text"),
    finishCode: $("finish-code"),
    finishCodes: $("finish-codes"),
    verdict: $("json-verdict"),
    endMarker: $("end-marker"),
    runMeta: $("run-meta"),
    more: $("text-more"),
  };
  const stream = createTextStream(dom.gen);
  let spans = new Map(); // step -> its span in the text
  let marked = null; // the span shown as selected
  let tabbable = null; // the one span in the tab order

  // A box shorter than its text (a narrow screen keeps it to two lines) says where the rest is.
  // Two empty marks at the text's two ends are watched against the box: the browser works out
  // whether each is in view in its own layout of the frame, so a streaming run never makes it
  // lay the page out once more to answer (reading scrollTop and scrollHeight would).
  const ends = [el("span", "text-end"), el("span", "text-end")];
  for (const end of ends) end.setAttribute("aria-hidden", "true");
  dom.text.prepend(ends[0]);
  dom.text.append(ends[1]);
  const inView = new Map(ends.map((end) => [end, true]));
  const watch = new IntersectionObserver((entries) => {
    for (const entry of entries) inView.set(entry.target, entry.isIntersecting);
    const above = !inView.get(ends[0]);
    const below = !inView.get(ends[1]);
    const more = dom.text.hidden ? "" : above && below ? "both" : above ? "above" : below ? "below" : "";
    if (dom.text.dataset.more === more) return;
    dom.text.dataset.more = more;
    dom.more.hidden = !more;
    dom.more.textContent = above && below ? "More text above and below: scroll the box ↕"
      : above ? "More text above: scroll the box ↑" : "More text below: scroll the box ↓";
  }, { root: dom.text, rootMargin: "2px" });
  for (const end of ends) watch.observe(end);

  store.subscribe((change) => {
    switch (change.type) {
      case "run-start": return started(change.run);
      case "steps": return stepsCame(change.run, change);
      case "run-end": return ended(change.run);
      case "run-cleared": return cleared();
      case "select": return selected(change.run, change.focus);
      case "worker": return worker(change);
      default:
    }
  });

  function started(run) {
    spans = new Map();
    marked = tabbable = null;
    dom.placeholder.hidden = true;
    dom.text.hidden = false;
    const prompt = run.settings.prompt || "";
    showPrompt(prompt, run.prompt_tokens, run.healed);
    dom.prompt.title = prompt ? "Prompt" : "Start of a sequence (empty prompt)";
    dom.gen.replaceChildren();
    stream.update(run, 0);
    showUnshown(run);
    dom.endMarker.hidden = true;
    dom.runMeta.textContent = "";
    dom.finishText.textContent = "Generating…";
    dom.finishCodes.hidden = true;
    showVerdict(null);
    dom.finish.classList.remove("idle");
  }

  // Back to how the page opens: no run on screen (the last was another model's).
  function cleared() {
    spans = new Map();
    marked = tabbable = null;
    dom.placeholder.hidden = false;
    dom.text.hidden = true;
    dom.prompt.replaceChildren();
    dom.gen.replaceChildren();
    dom.held.hidden = dom.cut.hidden = true;
    dom.endMarker.hidden = true;
    dom.runMeta.textContent = "";
    dom.finishText.textContent = "No text generated yet.";
    dom.finishCodes.hidden = true;
    showVerdict(null);
    dom.finish.classList.add("idle");
  }

  // The prompt, one span per token (shaded when tokens are shown); a healed last token is
  // marked as taken back.
  function showPrompt(prompt, pieces, healed) {
    if (!Array.isArray(pieces) || pieces.join("") + (healed || "") !== prompt) {
      dom.prompt.textContent = prompt;
      return;
    }
    const parts = pieces.map((piece, i) => el("span", `ptok${(pieces.length - i) % 2 ? " tok-odd" : ""}`, piece));
    if (healed) {
      const span = el("span", "ptok healed", healed);
      span.title = "Taken back by token healing: the first new token redoes it";
      parts.push(span);
    }
    dom.prompt.replaceChildren(...parts);
  }

  function stepsCame(run, { flow, held }) {
    if (run.reading) dom.finishText.textContent = `Reading the prompt: ${run.reading.done.toLocaleString("en")} of ${run.reading.total.toLocaleString("en")} tokens…`;
    if (run.checking) dom.finishText.textContent = "Written; the cache check is making its full pass over the text…";
    stream.update(run, held.length ? held[0][0] : run.steps.length);
    for (const [step, text] of flow) {
      if (text == null) addPart(step, run.steps[step]);
      else for (const ch of text) appendChar(step, ch);
    }
    if (run.checking) stream.flush(); // the text is whole: on screen now, not at the next frame
    showUnshown(run);
    if (run.follow) selected(run, false);
  }

  function newSpan(className, step) {
    const span = el("span", className);
    span.setAttribute("role", "button");
    span.tabIndex = -1;
    span.dataset.step = String(step);
    return span;
  }

  function addPart(index, step) {
    const mark = PART_MARKS[step.token_text];
    const opens = step.token_text === "<|call|>" ? " part-open" : step.token_text === "<|/result|>" ? " part-close" : "";
    const span = newSpan(`tok part part-${step.part}${step.source === "tool" ? " by-tool" : ""}${mark != null ? " part-mark" : ""}${opens}`, index);
    span.setAttribute("aria-pressed", "false");
    span.textContent = mark != null ? mark : step.piece || "";
    if (step.token_text === "<|/result|>") span.setAttribute("aria-label", "end of the result");
    spans.set(index, span);
    stream.add(span);
  }

  function appendChar(index, ch) {
    let span = spans.get(index);
    if (!span) {
      span = newSpan("tok", index);
      if (index % 2) span.classList.add("tok-odd"); // token boundaries, when they are shown
      span.setAttribute("aria-pressed", "false");
      spans.set(index, span);
      stream.add(span); // into the text at the next flush, about 30 times a second
    }
    span.textContent += ch;
    // named anew as each character comes: “␣” alone is "space", “␣the” is "space, the"
    const name = tokenName(span.textContent);
    if (name) span.setAttribute("aria-label", name);
    else span.removeAttribute("aria-label");
    span.classList.toggle("nl", span.textContent === "\n");
    span.classList.toggle("ws", span.textContent === " " || span.textContent === "\t");
  }

  // What was generated but is not in the text: held back (while the run goes on), cut by a stop
  // string (at the end). Both are shown after the text, marked, and each character still
  // selects the step that chose it.
  function unshownSpans(runs) {
    return runs.map(([step, text]) => {
      const span = newSpan("tok unshown", step);
      span.textContent = text;
      const name = tokenName(text);
      if (name) span.setAttribute("aria-label", name);
      return span;
    });
  }

  function showUnshown(run) {
    const cut = run.done && run.finish ? run.finish.cut : [];
    const held = run.done ? [] : run.held;
    dom.held.hidden = !held.length;
    dom.held.replaceChildren(...unshownSpans(held));
    dom.held.title = held.length ? "Held back for now: it may be the start of a stop string" : "";
    dom.cut.hidden = !cut.length;
    if (!cut.length) return dom.cut.replaceChildren();
    const struck = el("s", "cut-chars");
    struck.append(...unshownSpans(cut));
    dom.cut.replaceChildren(struck, el("span", "cut-label", `cut: the stop string “${readable(run.finish.stop_reason)}”`));
  }

  function showVerdict(json) {
    const status = json && json.status;
    dom.verdict.hidden = !status;
    if (!status) return;
    dom.verdict.dataset.status = status;
    dom.verdict.textContent = status === "valid" ? VERDICTS.valid : `${VERDICTS[status]}${json.error}.`;
  }

  function ended(run) {
    if (!run.finish) return; // cut off by a failure: the worker's words say so
    stream.flush();
    showUnshown(run);
    const f = run.finish;
    dom.finishText.textContent = finishSentence(f.finish_reason, f.stop_reason, run.settings.max_new_tokens);
    dom.finishCode.textContent = finishCode(f.finish_reason, f.stop_reason); // as the trace says it
    dom.finishCodes.hidden = false;
    showVerdict(f.json);
    // the rate this page measured for the text (the reading of the prompt included); the live
    // check's catching up after the text, said apart
    const ms = run.textElapsed ?? run.elapsed;
    // a long prompt, read over several batches: its reading said apart, the rate after it
    const read = run.readPrompt && run.firstElapsed != null ? run.firstElapsed : 0;
    const made = read ? run.steps.length - 1 : run.steps.length;
    const perSecond = Math.round((1000 * made) / (ms - read));
    const rate = ms - read > 0 && made > (read ? 0 : 1) ? ` · ${perSecond.toLocaleString("en")} ${perSecond === 1 ? "step" : "steps"} a second${read ? " after it" : ""}` : "";
    const first = read ? ` · the prompt read and the first step made in ${seconds(read)}` : "";
    const skipped = run.finish.check_skipped ? ", given up (Stop, or the next run)" : "";
    const check = run.textElapsed != null ? ` · then the cache check, ${seconds(run.elapsed - run.textElapsed)}${skipped}` : "";
    dom.runMeta.textContent = `${plural(run.steps.length, "step", "steps")} · ${seconds(ms)}${first}${rate}${check}`;
    const last = run.steps.length - 1;
    if (last >= 0) {
      const eos = run.steps[last].token_text === "<eos>";
      dom.endMarker.hidden = false;
      dom.endMarker.dataset.step = String(last);
      // The visible words start the accessible name (WCAG 2.5.3); the rest is for screen readers.
      dom.endMarker.replaceChildren(
        el("span", null, eos ? `◼ end · step ${last + 1}` : `Last step: ${last + 1}`),
        el("span", "visually-hidden", eos ? " (inspect the step where end-of-sequence was chosen)" : " (inspect it)"),
      );
    }
    stream.finish(run);
    selected(run, false);
  }

  function worker({ what, message, ms }) {
    if (what === "failed") dom.finishText.textContent = `Something went wrong in Python: ${message} Your settings are kept, so you can try again.`;
    else if (what === "lost") dom.finishText.textContent = `${message} Starting it again… Your settings and the text above are kept.`;
    else if (what === "restarted") dom.finishText.textContent = `${message} It was started again in ${seconds(ms)}; your settings and the text above are kept. Press Generate to go on.`;
  }

  // Only the selected character is marked, and only it (or the first) is in the tab order; the
  // arrow keys move between characters.
  function selected(run, focus) {
    stream.reveal(run, run.selected);
    const span = spans.get(run.selected) || null;
    if (marked && marked !== span) {
      marked.classList.remove("selected");
      marked.setAttribute("aria-pressed", "false");
    }
    if (span) {
      span.classList.add("selected");
      span.setAttribute("aria-pressed", "true");
    }
    marked = span;
    const first = span || spans.values().next().value || null;
    if (tabbable && tabbable !== first) tabbable.tabIndex = -1;
    if (first) first.tabIndex = 0;
    tabbable = first;
    if (focus && span) span.focus();
  }

  dom.text.addEventListener("click", (event) => {
    const span = event.target.closest(".tok");
    if (span) store.select(Number(span.dataset.step), { focus: true });
  });

  dom.gen.addEventListener("keydown", (event) => {
    const span = event.target.closest(".tok");
    if (!span || !store.state.run) return;
    const visible = [...spans.keys()];
    const at = visible.indexOf(Number(span.dataset.step));
    const to = { ArrowRight: at + 1, ArrowDown: at + 1, ArrowLeft: at - 1, ArrowUp: at - 1, Home: 0, End: visible.length - 1, Enter: at, " ": at }[event.key];
    if (to == null) return;
    event.preventDefault();
    store.select(visible[Math.max(0, Math.min(to, visible.length - 1))], { focus: true });
  });

  dom.showTokens.addEventListener("change", () => dom.text.classList.toggle("show-tokens", dom.showTokens.checked));
  dom.endMarker.addEventListener("click", () => store.select(Number(dom.endMarker.dataset.step)));

  return {
    /** The span of a step in the text (the timeline dims what comes after a replayed step). */
    spans: () => spans,
    /** Show where one token ends and the next begins (Try this turns it on). */
    showTokens(on) {
      if (dom.showTokens.checked !== on) dom.showTokens.click();
    },
    get sealedCount() {
      return stream.sealedCount;
    },
  };
}
