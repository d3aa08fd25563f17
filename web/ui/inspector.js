// One step, taken apart: the step of the run on screen that is selected (the latest, while a run
// streams and nothing was picked), in one sentence, its numbers, notes on what the rules and the
// cache did there, the candidates table and where the draw landed. Everything is read from the
// step records Python made; greedy or not is Python's word (run.greedy).

import { cacheNotes, cacheStat, runTolerance } from "../kv/cache.js";
import { $, el } from "./dom.js";
import { candidateRows, count, drawSegments, fillDrawStrip, fixed, pct, plural, readable, spoken, stepOdds } from "./render.js";

const PREFILL_NOTES = {
  bigram: "First step: the model has read the prompt (prefill); a bigram only needs its last character. Each later step feeds in the character just chosen (decode).",
  transformer: "First step: the model has read the whole prompt at once (prefill) and cached its keys and values. Each later step feeds in only the character just chosen and reads the cache (decode).",
};

export function createInspector(store) {
  const dom = {
    empty: $("inspector-empty"),
    body: $("inspector-body"),
    prev: $("prev-step"),
    next: $("next-step"),
    count: $("step-count"),
    stepper: $("stepper"),
    summary: $("step-summary"),
    stats: $("stats"),
    notes: $("step-notes"),
    caption: $("cands-caption"),
    rows: $("cand-rows"),
    table: $("cands").closest(".table-wrap"),
    legend: $("inspector-body").querySelector(".legend"),
    tableNote: $("table-note"),
    draw: $("draw"),
    drawCaption: $("draw-caption"),
    drawStrip: $("draw-strip"),
  };
  let pending = 0;
  let followedAt = 0;

  store.subscribe((change) => {
    if (change.type === "run-start" || change.type === "select" || change.type === "run-cleared") return render();
    if (change.type === "run-end") return schedule();
    if (change.type === "steps") {
      // While a run streams, the inspector follows it ten times a second, not every frame: each
      // redraw costs layout, and the text itself keeps streaming in between.
      const now = performance.now();
      if (!followedAt || now - followedAt >= 100 || !change.run.follow) {
        followedAt = now;
        schedule();
      }
    }
  });

  dom.prev.addEventListener("click", () => store.state.run && store.select(store.state.run.selected - 1));
  dom.next.addEventListener("click", () => store.state.run && store.select(store.state.run.selected + 1));

  function schedule() {
    if (pending) return;
    // While a run streams, the inspector updates in a task of its own, not inside the frame that
    // also draws the new text: two short tasks instead of one long one. Its layout is done in
    // that task too (most of its cost); left to the next frame, it would land on the text's.
    const run = store.state.run;
    const streaming = run && !run.done;
    pending = (streaming ? setTimeout : requestAnimationFrame)(() => {
      pending = 0;
      render();
      if (streaming) dom.body.getBoundingClientRect();
    });
  }

  function render() {
    const run = store.state.run;
    if (run && run.steps.length === 0) followedAt = 0;
    const step = run && run.selected != null ? run.steps[run.selected] : null;
    dom.empty.hidden = Boolean(step);
    dom.body.hidden = !step;
    dom.prev.disabled = !step || run.selected === 0;
    dom.next.disabled = !step || run.selected >= run.steps.length - 1;
    dom.count.textContent = step ? `Step ${run.selected + 1} of ${run.steps.length}` : "";
    dom.stepper.hidden = !step;
    if (!step) return;
    if (step.source === "tool") return renderToolStep(run, step);
    dom.table.hidden = dom.legend.hidden = false;
    const greedy = run.greedy;
    const chosen = step.top.find((c) => c.token_id === step.token_id);

    // One sentence that says what happened, and how sure it was (stepOdds: in greedy mode there
    // is no draw, so the odds are the model's own).
    const odds = stepOdds(step, greedy);
    let summary;
    if (step.u == null) summary = `Greedy: took the argmax, the candidate the model itself rated highest, ${spoken(step.token_text)}, at ${pct(odds.p)}.`;
    else summary = `The draw u = ${fixed(step.u, 4)} picked ${spoken(step.token_text)}, which had a ${pct(step.prob)} chance after the rules (the model alone gave it ${pct(Math.exp(step.logprob))}).`;
    if (step.token_text === "<eos>") summary += " That ends the text.";
    dom.summary.textContent = summary;

    const V = run.vocab_size;
    stats([
      ["Chosen", readable(step.token_text)],
      greedy ? ["Model’s chance", pct(odds.p)] : ["Chance", pct(step.prob)],
      ["Draw u", step.u == null ? "none" : fixed(step.u, 4)],
      [greedy ? "Model’s entropy" : "Entropy", `${fixed(odds.entropy, 2)} nats`],
      ["Kept", V ? `${count(step.kept_count)} of ${count(V)}` : count(step.kept_count)],
      cacheStat(step),
    ]);
    notes([...stepNotes(run, step), ...cacheNotes(step, runTolerance(run, store.state.info), run.settings.context_shift, store.state.info.cache_check_every)]);

    dom.caption.textContent = `Step ${run.selected + 1}: the ${plural(step.top.length, "likeliest candidate", "likeliest candidates")} and their probabilities at each stage`;
    dom.rows.replaceChildren(...candidateRows(step, greedy));
    const listed = step.top.length;
    let note = V && listed < V ? `The ${listed} likeliest of ${count(V)} candidates after temperature` : "All candidates";
    if (chosen && step.top.indexOf(chosen) >= store.state.info.top_n) note += ", plus the chosen one";
    note += ".";
    if (greedy) note += " Greedy takes the top of the model's own column; the final column puts all the weight on it.";
    dom.tableNote.textContent = note;
    renderDraw(step);
  }

  function stats(pairs) {
    dom.stats.replaceChildren(...pairs.filter(Boolean).map(([term, value]) => {
      const div = el("div", "stat");
      div.append(el("dt", null, term), el("dd", null, value));
      return div;
    }));
  }

  function notes(lines) {
    dom.notes.replaceChildren(...lines.map((text) => el("span", "note-line", text)));
    dom.notes.hidden = !lines.length;
  }

  // A token the program appended after a tool call: no rule chose it, so there is nothing to
  // draw but where it came from and what the cache did with it.
  function renderToolStep(run, step) {
    const call = step.tool_call;
    const what = call && call.by === "tool"
      ? (call.error ? `the calculator’s error for the call ${quote(call.call)}` : `the calculator’s answer to ${quote(call.call)}, ${quote(call.result)}`)
      : "the marker that opens a result, so the model must write the result itself (tools: guess)";
    dom.summary.textContent = `Not chosen by the model: the program appended ${spoken(step.token_text)} as part of ${what}. The model closed its call, generation paused, and these tokens were fed in one pass; then the model went on from the same cache.`;
    stats([["Token", readable(step.token_text)], ["Written by", "the tool runtime"], ["Draw u", "none"], cacheStat(step)]);
    const lines = [...tokenNotes(run, step), ...cacheNotes(step, runTolerance(run, store.state.info), run.settings.context_shift, store.state.info.cache_check_every)];
    if (step.cache_length != null) lines.push(`The cache now holds ${step.cache_length} positions: only the appended tokens were computed, everything before them was read from the cache.`);
    notes(lines);
    dom.caption.textContent = `Step ${run.selected + 1}: no candidates`;
    dom.rows.replaceChildren();
    dom.table.hidden = dom.legend.hidden = true;
    dom.tableNote.textContent = "No rule chose this token, so there are no probabilities to show. The next step the model takes starts from logits computed after it.";
    renderDraw(step);
  }

  function renderDraw(step) {
    if (step.u == null) {
      dom.draw.hidden = true;
      return;
    }
    dom.draw.hidden = false;
    const segments = drawSegments(step);
    const how = "How the draw works: the kept candidates are laid end to end in id order, each as long as its final probability";
    dom.drawStrip.hidden = !segments;
    dom.draw.querySelector(".draw-scale").hidden = !segments;
    if (!segments) {
      dom.drawCaption.textContent = `${how}. u = ${fixed(step.u, 4)} lands in the stretch of ${spoken(step.token_text)}. (The strip of all ${step.kept_count} kept candidates is drawn under “Every rule in order”, below.)`;
      dom.drawStrip.replaceChildren();
      return;
    }
    dom.drawCaption.textContent = `${how}. u = ${fixed(step.u, 4)} lands in the stretch of ${spoken(step.token_text)}.`;
    fillDrawStrip(dom.drawStrip, segments.map((seg) => ({ width: seg.width, label: seg.token.token_text, chosen: seg.chosen })), step.u);
  }

  return { render };
}

function quote(text) {
  return `“${text == null ? "" : text}”`;
}

// What a BPE token was made of, and what became of it: its bytes, the characters it carried,
// the healed first token, a stop string that began inside it.
function tokenNotes(run, step) {
  const out = [];
  const hex = step.token_bytes || "";
  const n = hex.length / 2;
  if (run.settings.tokenizer !== "bpe" || step.token_text === "<eos>") return out;
  if (!n) {
    out.push("A special token: an id of its own after the learned merges, with no text. Nothing typed into a prompt can produce it; only the model or the program that runs the tool puts it in the sequence.");
    return out;
  }
  const bytes = hex.match(/../g).join(" ");
  const carried = [...(step.piece || "")].length;
  if (step.step === 0 && run.healed != null) {
    out.push(`Token healing: the prompt’s last token ${spoken(run.healed)} was taken back, and this first token had to start with it. The text shows only what comes after it.`);
  }
  let words = `This token is ${plural(n, "byte", "bytes")} (${bytes})`;
  if (carried > 0) words += `; it completed ${plural(carried, "character", "characters")}.`;
  else if (step.step === 0 && run.healed != null) words += ", exactly the text healing took back, so it adds nothing new.";
  else words += ", and no whole character: it ends inside one, so the text waits for the next token to finish it.";
  out.push(words);
  // where a stop string cut the text: the last step's record says in which token
  const last = run.done ? run.steps[run.steps.length - 1] : null;
  const cut = last && last.stop_at;
  if (cut && cut.step === step.step && cut.byte < n) {
    out.push(`The visible text ends ${cut.byte ? `after ${plural(cut.byte, "byte", "bytes")} of this token` : "just before this token"}: a stop string begins inside it, so the token is cut in two.`);
  }
  return out;
}

function stepNotes(run, step) {
  const s = run.settings;
  const out = [];
  if (step.phase === "prefill") {
    out.push(PREFILL_NOTES[s.model] || "First step: the model has read the prompt (prefill). Each later step feeds in the character just chosen (decode).");
  }
  if (s.ignore_eos || step.step < (s.min_new_tokens || 0)) {
    out.push(s.ignore_eos
      ? "Ignore EOS is on: end-of-sequence is blocked, so it gets probability 0 after the model column."
      : "Min new tokens: end-of-sequence is still blocked at this step, so it gets probability 0 after the model column.");
  }
  if (Number(s.repetition_penalty) !== 1) {
    out.push("Repetition penalty is on: characters already used were marked down before temperature, so the middle column includes it.");
  }
  if (step.orders_differ) {
    const other = s.order === "filter-first" ? "temperature-first" : "filter-first";
    out.push(`The other order (${other}) would keep a different set of candidates at this step.`);
  }
  // Characters that never reached the visible text.
  out.push(...tokenNotes(run, step));
  if (step.part === "call") out.push("Part of a tool call: this token went to the call the calculator reads, not to the answer’s text.");
  if (step.part === "result") out.push("The model is writing the tool’s result itself (tool calls: guess): no calculator checks it.");
  const inAnswer = !step.part || step.part === "answer";
  if (inAnswer && step.token_text !== "<eos>" && !run.shown[run.selected] && (step.piece == null || step.piece)) {
    if (!run.done) out.push("Held back for now: it may be the start of a stop string.");
    else if (run.finish && run.finish.finish_reason === "stop" && run.finish.stop_reason !== "eos") {
      out.push(`Part of the stop string “${readable(run.finish.stop_reason)}”, so it was cut from the text.`);
    }
  }
  // greedy without the switch: Python's word for it is temperature 0
  if (run.greedy && step.u == null && !s.greedy) out.push("Temperature 0 means greedy: no random draw.");
  return out;
}
