// What an engine's choices change: one message to the real model through both engines, step by
// step (Python's lesson.twoengines, endpoint twoengines). Python makes the float32 twin from the
// quantized engine's blocks, runs both greedily, and measures; this panel draws what it says:
// a summary, the two answers (where they part marked), what each engine holds and how fast it
// went, and a row per step. The WebAssembly memory before and after is the page's own reading.

import { bytes } from "../ui/bytes.js";
import { $, el } from "../ui/dom.js";
import { count, fieldError, pct, plural, readable, seconds } from "../ui/render.js";

const FIELDS = { message: "twoengines-message", answer_tokens: "twoengines-tokens" };
const TOP_SHOWN = 3; // of Python's five candidates per step

const logit = (x) => (Math.abs(x) < 0.005 ? "0.00" : x.toFixed(2));

/** Where the two greedy answers part, in words: both answers' tokens from Python. */
export function partedWords(r) {
  const g = r.greedy;
  const at = g.parted_at;
  if (at == null) return `Both engines give the same greedy answer, token for token (${plural(g.reference.length, "token", "tokens")}).`;
  const said = (name) => (at < g.tokens[name].length ? `“${readable(g.tokens[name][at])}”` : "nothing more (its answer had ended)");
  return `The greedy answers part at step ${at + 1}: the reference writes ${said("reference")}, the quantized engine ${said("quantized")}, and from there each follows its own text.`;
}

/** The comparison in a few sentences, every number Python's. */
export function twoEnginesSummary(r) {
  const s = r.summary;
  const ref = r.engines.reference;
  const q = r.engines.quantized;
  const speed = ref.seconds_per_step > 0 && q.seconds_per_step > 0 ? ref.seconds_per_step / q.seconds_per_step : null;
  const out = [
    `${r.prompt_tokens} tokens of prompt, then ${plural(s.steps, "step", "steps")} along the reference’s answer: the two engines’ first choices agree at ${s.same_first} of ${s.steps}.`,
    `Between their distributions, a median of ${pct(s.median_distance)} of the probability moved, and at most ${pct(s.largest_distance)}.`,
    partedWords(r),
    `The quantized engine holds its weights in ${bytes(q.weight_bytes)} against the reference’s ${bytes(ref.weight_bytes)} (${pct(q.weight_bytes / ref.weight_bytes)}).`,
  ];
  if (speed) out.push(`A decode step took ${seconds(1000 * q.seconds_per_step)} quantized and ${seconds(1000 * ref.seconds_per_step)} in float32 here: ${speed >= 1 ? `${speed.toFixed(1)} times as fast` : `${(1 / speed).toFixed(1)} times as slow`} (measured in this run).`);
  return out.join(" ");
}

/** The rows of "what each engine holds": [term, reference, quantized]. */
export function heldRows(r) {
  const ref = r.engines.reference;
  const q = r.engines.quantized;
  const numbers = ref.cache_numbers_per_position;
  return [
    ["Weights held", bytes(ref.weight_bytes), bytes(q.weight_bytes)],
    ["KV cache per position", `${bytes(ref.cache_bytes_per_position)} (${count(numbers)} float32 numbers)`,
      `${bytes(q.cache_bytes_per_position)} here, float16 values in float32 arrays; llama.cpp’s own float16 cache: ${bytes(q.cache_bytes_per_position_llamacpp)}`],
    ["Time per decode step (this run)", seconds(1000 * ref.seconds_per_step), seconds(1000 * q.seconds_per_step)],
  ];
}

export function createTwoEngines(app) {
  const dom = {
    section: $("twoengines"), form: $("twoengines-form"), run: $("twoengines-run"), stop: $("twoengines-stop"),
    status: $("twoengines-status"), out: $("twoengines-out"), summary: $("twoengines-summary"),
    answers: $("twoengines-answers"), held: $("twoengines-held"), memory: $("twoengines-memory"),
    rows: $("twoengines-rows"), caption: $("twoengines-steps-caption"),
  };
  const controls = Object.fromEntries(Object.entries(FIELDS).map(([name, id]) => [name, $(id)]));
  let call = null; // the comparison in flight: {reply, stop}

  function engineLabel(id) {
    const choices = app.info()?.pretrained?.engines?.choices || [];
    return choices.find((c) => c.id === id)?.label || id;
  }

  function answerCard(r, name) {
    const box = el("article", `card twoengines-answer twoengines-${name}`);
    box.append(el("h4", null, engineLabel(name)));
    const text = el("p", "text twoengines-text");
    const at = r.greedy.parted_at;
    // the answer token by token (Python's labels), its own from where the two part
    r.greedy.tokens[name].forEach((t, i) => {
      text.append(el("span", at != null && i >= at ? "twoengines-own" : null, t));
    });
    box.append(text);
    return box;
  }

  function candidates(list) {
    const cell = el("td", "twoengines-cands");
    for (const c of list.slice(0, TOP_SHOWN)) {
      const item = el("span", "twoengines-cand");
      item.append(el("span", "mono", readable(c.token_text)), el("span", "num", ` ${pct(c.p)}`));
      cell.append(item);
    }
    return cell;
  }

  function render(r, memory) {
    dom.summary.textContent = twoEnginesSummary(r);
    dom.answers.replaceChildren(answerCard(r, "reference"), answerCard(r, "quantized"));
    dom.held.replaceChildren(...heldRows(r).map(([term, a, b]) => {
      const tr = el("tr");
      tr.append(el("th", null, term), el("td", null, a), el("td", null, b));
      tr.firstChild.scope = "row";
      return tr;
    }));
    dom.memory.textContent = [memory, r.kernels].filter(Boolean).join(" ");
    dom.caption.textContent = `Each of the ${plural(r.steps.length, "step", "steps")}, along the reference’s answer (both engines read the same tokens); the bars are drawn against the step where most moved`;
    const most = Math.max(...r.steps.map((s) => s.distance), 0) || 1; // the bars' full width
    dom.rows.replaceChildren(...r.steps.map((s) => {
      const tr = el("tr", s.same_first ? null : "is-parted");
      const moved = el("td", "num twoengines-moved");
      const bar = el("span", "twoengines-bar");
      bar.style.setProperty("--w", `${(100 * s.distance / most).toFixed(1)}%`);
      moved.append(bar, el("span", null, pct(s.distance)));
      tr.append(el("td", "num", String(s.step + 1)), el("td", "mono", readable(s.token_text)),
        candidates(s.reference), candidates(s.quantized), el("td", "num", logit(s.largest_logit_difference)), moved);
      if (!s.same_first) tr.title = "The engines’ first choices differ here";
      return tr;
    }));
    dom.out.hidden = false;
  }

  // the page's WebAssembly memory, in a sentence: before and after the comparison
  function memoryWords(before, after) {
    if (!before || !after || before.wasm_bytes == null || after.wasm_bytes == null) return "";
    const grew = after.wasm_bytes - before.wasm_bytes;
    const how = grew > 0
      ? `it grew by ${bytes(grew)} for the comparison, mostly the float32 twin, which Python let go after; WebAssembly memory never shrinks, so the room stays, for Python to use again`
      : "the room the float32 twin took was there already, from an earlier comparison or run";
    return `This page’s WebAssembly memory: ${bytes(before.wasm_bytes)} before the comparison and ${bytes(after.wasm_bytes)} after; ${how}.`;
  }

  async function run() {
    if (call) return null;
    for (const c of Object.values(controls)) fieldError(c, null);
    dom.section.dataset.state = "running";
    dom.status.textContent = "Making the float32 twin, then both answers…";
    dom.run.disabled = true;
    dom.stop.hidden = false;
    let reply;
    let before = null;
    let after = null;
    try {
      before = await app.memory().catch(() => null);
      call = app.stoppable("twoengines", { message: controls.message.value, answer_tokens: controls.answer_tokens.value });
      reply = await call.reply;
      after = await app.memory().catch(() => null);
    } catch (err) { // the worker was lost, and the comparison with it
      reply = { ok: false, lost: err.message };
    } finally {
      call = null;
      dom.run.disabled = false;
      dom.stop.hidden = true;
    }
    app.last.twoengines = reply;
    if (!reply.ok) {
      const other = [];
      for (const e of reply.errors || []) {
        if (controls[e.field] && !reply.stopped) fieldError(controls[e.field], e.message);
        else other.push(e.message);
      }
      dom.status.textContent = reply.lost
        ? `${reply.lost} The comparison went with it; once Python is back, compare again.`
        : other.join(" ") || "Fix the field marked above.";
      dom.section.dataset.state = reply.stopped ? "stopped" : reply.lost ? "lost" : "invalid";
      return reply;
    }
    render(reply, memoryWords(before, after));
    dom.status.textContent = "";
    dom.section.dataset.state = "done";
    return reply;
  }

  dom.form.addEventListener("submit", (event) => {
    event.preventDefault();
    run();
  });
  dom.stop.addEventListener("click", () => {
    if (!call) return;
    dom.stop.disabled = true;
    call.stop();
    requestAnimationFrame(() => { dom.stop.disabled = false; });
  });

  return {
    ready() {
      dom.run.disabled = false;
    },
    run,
    last: app.last,
  };
}
