// decodelab's page: settings form, streaming text, step inspector. Python runs in worker.js;
// this module only sends plain settings objects there and draws what comes back.

import { checkField, checkTogether, describeControls, splitLines, vocabOf } from "./validate.js";
import {
  candidateRows, drawSegments, el, fillDrawStrip, finishCode, finishSentence, fixed, pct, plural, readable, seconds, spoken, stepOdds,
} from "./render.js";
import { installA11y } from "./a11y.js";
import { installEmbed } from "./embed.js";
import { installEmbedder } from "./embedder.js";
import { installExports } from "./exports.js";
import { installUrlState } from "./urlstate.js";
import { createLesson } from "./lesson.js";
import { cacheNotes, cacheStat, createKvLab } from "./cache.js";
import { createTextStream } from "./textstream.js";
import { createSupervisor } from "./supervisor.js";
import { createOffline } from "./offline.js";
import { unsupported } from "./support.js";

// --- DOM references ---------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);
const root = document.documentElement;
const dom = {
  status: $("status"),
  bootBox: $("boot"),
  bootTime: $("boot-time"),
  bootProgress: $("boot-progress"),
  phases: $("phases"),
  bootError: $("boot-error"),
  bootErrorMessage: $("boot-error-message"),
  form: $("settings"),
  formError: $("form-error"),
  model: $("model"),
  modelHint: $("model-hint"),
  dataset: $("dataset"),
  datasetHint: $("dataset-hint"),
  toolsField: $("tools-field"),
  prompt: $("prompt"),
  vocab: $("vocab"),
  vocabList: $("vocab-list"),
  vocabSummary: $("vocab-summary"),
  vocabWords: $("vocab-words"),
  greedy: $("greedy"),
  temperature: $("temperature"),
  reset: $("reset"),
  generate: $("generate"),
  stop: $("stop-button"),
  slow: $("slow"),
  exportButton: $("export"),
  runMeta: $("run-meta"),
  textPlaceholder: $("text-placeholder"),
  text: $("text"),
  textPrompt: $("text-prompt"),
  showTokens: $("show-tokens"),
  textGen: $("text-gen"),
  finishText: $("finish-text"),
  endMarker: $("end-marker"),
  inspectorEmpty: $("inspector-empty"),
  inspectorBody: $("inspector-body"),
  prevStep: $("prev-step"),
  nextStep: $("next-step"),
  stepCount: $("step-count"),
  stepper: $("stepper"),
  stepSummary: $("step-summary"),
  stats: $("stats"),
  stepNotes: $("step-notes"),
  candsCaption: $("cands-caption"),
  candRows: $("cand-rows"),
  candsTable: $("cands").closest(".table-wrap"),
  candsLegend: $("inspector-body").querySelector(".legend"),
  tableNote: $("table-note"),
  draw: $("draw"),
  drawCaption: $("draw-caption"),
  drawStrip: $("draw-strip"),
  trainForm: $("train-form"),
  trainText: $("train-text"),
  trainButton: $("train-button"),
  trainResult: $("train-result"),
  credits: $("credits"),
  textHeld: $("text-held"),
  textCut: $("text-cut"),
  finishCode: $("finish-code"),
  jsonVerdict: $("json-verdict"),
  slider: $("temperature-slider"),
  moreRules: $("more-rules"),
  moreCount: $("more-count"),
};

// Settings controls by field name (the control's name attribute is the field name).
const FIELD_NAMES = [...dom.form.elements].map((c) => c.name).filter(Boolean);
const controls = Object.fromEntries(FIELD_NAMES.map((name) => [name, dom.form.elements[name]]));
const SAMPLING_ONLY = [...dom.form.querySelectorAll("[data-sampling-only] [name]")].map((c) => c.name);
// The rules behind "More rules": the beginner's path shows the others first.
const MORE_RULES = [...dom.moreRules.querySelectorAll("[name]")].map((c) => c.name);
const PHASES = ["runtime", "numpy", "decodelab", "assets"];
const SLOW_MS = 140; // pause after each step in slow motion

// What each kind of model does, in a sentence (Python may send its own description instead).
const MODEL_HINTS = {
  bigram: "A bigram model looks only at the last character. Its scores are the logarithms of how often each character followed that one in the training text.",
  transformer: "A tiny transformer reads every earlier character through attention. It keeps their keys and values in a cache, so each new step computes only one new position.",
};
const PREFILL_NOTES = {
  bigram: "First step: the model has read the prompt (prefill); a bigram only needs its last character. Each later step feeds in the character just chosen (decode).",
  transformer: "First step: the model has read the whole prompt at once (prefill) and cached its keys and values. Each later step feeds in only the character just chosen and reads the cache (decode).",
};

// --- state ------------------------------------------------------------------------------------

const state = {
  info: null,
  specs: {}, // field name -> spec from Python
  datasets: {}, // dataset name -> description (including the learner's own text once trained)
  nextId: 1,
  pending: null, // the run requested but not started yet: {id, resolve}
  run: null, // the run on screen
  errors: {}, // field name -> message currently shown
  trained: null,
  // An embedded widget that shows only some controls (?controls=) keeps the others at its link's
  // values, whatever asks to change them, and Reset returns to the link (embed.js sets both).
  locks: null, // field name -> value, or null
  baseline: null, // the values Reset restores (null: Python's defaults)
};

function setState(name) {
  root.dataset.state = name;
}

// --- worker -------------------------------------------------------------------------------------

// The worker, watched: restarted if it stops answering or crashes (supervisor.js; recovery below).
const worker = createSupervisor(new URL("./worker.js", import.meta.url));
const replies = new Map(); // request id -> {resolve, reject} of the requests waiting for a reply

let readyResolve;
let readyReject;
const ready = new Promise((resolve, reject) => {
  readyResolve = resolve;
  readyReject = reject;
});
ready.catch(() => {}); // a failed boot is shown on the page; tests may still await the rejection

// What tests and embedding pages can wait on instead of sleeping.
const hooks = {
  ready,
  lastRun: null,
  get state() {
    return root.dataset.state;
  },
  get info() {
    return state.info;
  },
  trace: () => call("trace").then((r) => JSON.stringify(r.trace)),
  // Start a run with exactly these settings, skipping the page's own checks (Python still
  // checks them; errors appear next to the fields). Resolves like lastRun.
  generate: (settings) => (root.dataset.state === "ready"
    ? startRun(settings)
    : Promise.reject(new Error(`not ready (state ${root.dataset.state})`))),
  probs: (req) => call("probs", req),
  bench: (settings) => call("bench", settings),
  benchTokenize: (req) => call("bench_tokenize", req),
  benchTools: (req) => call("bench_tools", req || {}),
  benchJson: (req) => call("bench_json", req || {}),
  // Put values (already checked) into the form, as Reset does; the address and hosts use it.
  applySettings: (values) => applySettings(values),
  // Keep these settings as they are (an embed's hidden controls), and what Reset goes back to.
  lock: (values, baseline) => {
    state.locks = values && Object.keys(values).length ? { ...values } : null;
    state.baseline = baseline ? { ...baseline } : null;
  },
  isLocked: (name) => Boolean(state.locks && Object.hasOwn(state.locks, name)),
  timings: null, // boot phases in ms, from the worker, once ready
  // Memory the worker holds (WebAssembly memory, live Python objects) and its restarts.
  memory: () => request({ type: "memory-report" }).then((m) => m.result),
  get health() {
    return { ...worker.stats, recovering: worker.recovering, interruptible: worker.interruptible, shared: worker.shared,
      sealedText: textStream.sealedCount };
  },
};
// Offline after the first visit (offline.js, sw.js): started once the page is ready.
const offline = createOffline(document.getElementById("offline"));
hooks.offline = offline.status;
window.decodelab = hooks;
// A browser that cannot run the lesson is told so in words, and what to do (support.js).
const cannot = unsupported();
if (cannot) {
  onBootError(cannot.problem);
  dom.bootError.querySelector(".boot-error-hint").textContent = cannot.remedy;
}
if (worker.faults) hooks.injectFault = (kind) => worker.injectFault(kind); // tests only: ?faults=1

// The lesson around the workbench (lesson.js): the next token under the rules being set, the step
// view's timeline and rules, the playground, the experiment, Try this, the runs kept for
// comparing, the questions.
const lesson = createLesson({
  call, select, collect, peek, run: () => state.run, info: () => state.info,
  apply: (values) => {
    const merged = { ...state.info.defaults, ...values };
    // a dataset read by one tokenizer only takes it unless one is named (as in Python)
    const d = state.datasets[merged.dataset];
    if (!("tokenizer" in values) && d && d.tokenizers && !d.tokenizers.includes(merged.tokenizer)) merged.tokenizer = d.tokenizers[0];
    return applySettings(merged);
  },
  generate: () => generateFromForm(),
  kv: () => kv,
  last: {}, // each lesson panel's latest reply from Python (tests read it)
});
hooks.lesson = lesson;

// The KV cache: the live check, the batch view, break it on purpose, memory and cost, both
// models side by side (cache.js). hooks.kv.last holds each panel's latest reply, for tests.
const kv = createKvLab({ call, collect, info: () => state.info, last: {} });

// Long runs stay cheap to draw: older characters are sealed into plain text while streaming.
const textStream = createTextStream(dom.textGen);
hooks.kv = kv;

// Page events for the modules that announce, share, export and embed (a11y.js, urlstate.js,
// exports.js, embed.js): "decodelab:run-start" {settings}, "decodelab:run-end" (what lastRun
// resolves to), "decodelab:select" {step} when the learner picks a step.
function emit(name, detail) {
  document.dispatchEvent(new CustomEvent(`decodelab:${name}`, { detail }));
}

// A message to the worker that gets one reply: resolves with that reply.
function request(message) {
  const id = state.nextId++;
  return new Promise((resolve, reject) => {
    replies.set(id, { resolve, reject });
    worker.postMessage({ ...message, id });
  });
}

// An endpoint of the Python side (decodelab.entry.webapi): resolves with its answer, which is
// {ok: true, ...} or {ok: false, errors: [{field, label, message}]}.
function call(endpoint, body = {}) {
  return request({ type: "call", endpoint, request: body }).then((m) => m.result);
}

worker.addEventListener("message", (event) => {
  const m = event.data;
  switch (m.type) {
    case "progress": return onProgress(m);
    case "ready": return onReady(m);
    case "warmed-up": return onWarmedUp(m);
    case "boot-error": return onBootError(m.message);
    case "started": return onStarted(m);
    case "steps": return onSteps(m);
    case "done": return onDone(m);
    case "invalid": return onInvalid(m);
    case "error": return onError(m);
    default: {
      const reply = replies.get(m.id);
      if (reply) {
        replies.delete(m.id);
        reply.resolve(m);
      }
    }
  }
});

worker.addEventListener("error", (event) => {
  event.preventDefault();
  if (root.dataset.state === "loading") {
    onBootError(`The background worker that runs Python could not start${event.message ? `: ${event.message}` : "."}`);
  }
});

// --- recovery: the worker stopped answering or crashed, and supervisor.js starts a new one ------
// What was in flight is given up with a message; the settings and the text on screen stay.

const TROUBLE = {
  hang: "The Python worker stopped answering, so it was stopped.",
  crash: "The Python worker crashed.",
  fatal: "Python failed and could not go on (for example, it ran out of memory).",
};

worker.addEventListener("lost", (event) => {
  const what = TROUBLE[event.detail.reason] || TROUBLE.crash;
  for (const reply of replies.values()) reply.reject(new Error(what));
  replies.clear();
  const target = state.pending || (state.run && !state.run.done ? state.run : null);
  if (target) onError({ id: target.id, message: what });
  if (!state.info) return; // still starting up: the start-up screen shows the new attempt
  setState("loading");
  setEnabled(false);
  dom.status.textContent = `${what} Starting it again…`;
  dom.finishText.textContent = `${what} Starting it again… Your settings and the text above are kept.`;
});

worker.addEventListener("restarted", (event) => {
  setEnabled(true);
  setState("ready");
  const what = TROUBLE[event.detail.reason] || TROUBLE.crash;
  dom.status.textContent = `${what} Python was started again in ${seconds(event.detail.ms)}. Your settings are kept.`;
  dom.finishText.textContent = `${what} It was started again in ${seconds(event.detail.ms)}; your settings and the text above are kept. Press Generate to go on.`;
  if (state.run) dom.exportButton.disabled = true; // the trace of that run went with the old worker
  restoreRun();
});

// The new worker's Python knows no run. A finished run is a pure function of its settings and
// seed, so the new worker makes it again (webapi.restore); when the text and the step count
// match what is on screen, Export trace and the lesson's view of a step work as before.
async function restoreRun() {
  const run = state.run;
  if (!run || !run.done || !run.finish) return;
  let reply;
  try {
    reply = (await request({ type: "restore", settings: run.settings, steps: run.steps.length })).result;
  } catch {
    return; // the new worker failed too: the supervisor says so
  }
  if (run !== state.run || !reply || !reply.ok) return;
  if (reply.text !== run.finish.text || reply.steps !== run.steps.length) return;
  run.restored = true;
  dom.exportButton.disabled = false;
  lesson.selected(run);
}

// Where the page is cross-origin isolated, a stuck Python call is interrupted instead of the
// worker being replaced: the request it was serving fails with its own message (just after
// this); nothing else was lost.
worker.addEventListener("interrupted", (event) => {
  dom.status.textContent = `Python stopped answering for ${seconds(event.detail.ms)}, so the call it was stuck in was interrupted. Everything else is kept.`;
});

worker.addEventListener("restart-failed", (event) => {
  if (state.info) root.dataset.state = "loading"; // onBootError reports from the start-up state
  onBootError(event.detail.message);
});

// --- boot -------------------------------------------------------------------------------------

function onProgress(m) {
  if (root.dataset.state !== "loading") return; // late news after a failure
  dom.status.textContent = m.label;
  dom.bootProgress.value = m.fraction;
  dom.bootTime.textContent = seconds(m.ms);
  const index = PHASES.indexOf(m.phase);
  for (const li of dom.phases.children) {
    const i = PHASES.indexOf(li.dataset.phase);
    li.dataset.state = m.phase === "ready" || i < index ? "done" : i === index ? "active" : "pending";
    if (li.dataset.state === "active") li.setAttribute("aria-current", "step");
    else li.removeAttribute("aria-current");
  }
}

function onReady({ info, timings }) {
  state.info = info;
  hooks.timings = { ...(timings || {}), page_ready_ms: Math.round(performance.now()) };
  for (const spec of info.fields || []) state.specs[spec.name] = spec;
  state.datasets = { ...(info.datasets || {}) };
  fillChoices(info);
  applySettings(info.defaults || {});
  writeCredits(info);
  setEnabled(true);
  lesson.ready();
  kv.ready();
  updateGreedyNotes();
  const t = timings || {};
  dom.status.textContent = t.joined
    ? "Ready. This widget shares the Python that the site's other widgets on this page started."
    : `Ready. Python started in ${seconds(t.total_ms || 0)}${t.snapshot === "restored" ? ", from what this browser kept of its last start" : ""}.`;
  dom.bootTime.textContent = [
    ["runtime", t.runtime_ms], ["numpy", t.numpy_ms], ["package", t.decodelab_ms], ["data", t.assets_ms],
  ].filter(([, ms]) => ms != null).map(([what, ms]) => `${what} ${seconds(ms)}`).join(" · ");
  dom.bootBox.classList.add("is-ready");
  setState("ready");
  readyResolve(info);
  offline.start(); // saving the site waits for the page's start (a second call does nothing)
}

// The worker's first short run of each model, just after ready, has ended (worker.js warmUp).
function onWarmedUp({ ms }) {
  if (hooks.timings) hooks.timings.warmup_ms = ms;
}

function onBootError(message) {
  if (root.dataset.state === "error") return;
  setState("error");
  const failed = [...dom.phases.children].find((li) => li.dataset.state === "active");
  dom.status.textContent = failed ? `Start-up stopped at: ${failed.textContent.trim()}.` : "Start-up stopped.";
  dom.bootBox.classList.add("is-failed");
  for (const li of dom.phases.children) {
    if (li.dataset.state === "active") li.dataset.state = "failed";
  }
  dom.bootError.hidden = false;
  dom.bootErrorMessage.textContent = message;
  setEnabled(false);
  readyReject(new Error(message));
}

function fillChoices(info) {
  replaceOptions(controls.model, (info.models || []).map((m) => [m.id, m.label || m.id]));
  replaceOptions(controls.dataset, Object.entries(state.datasets).map(([name, d]) => [name, d.label || name]));
  const order = state.specs.order;
  if (order && order.choices) replaceOptions(controls.order, order.choices.map((c) => [c, c]));
  describeControls(document, state.specs);
}

function replaceOptions(select, pairs) {
  if (!pairs.length) return;
  select.replaceChildren(...pairs.map(([value, label]) => {
    const option = el("option", null, label);
    option.value = value;
    return option;
  }));
}

function writeCredits(info) {
  const parts = Object.values(info.datasets || {}).map((d) => {
    const bits = [d.label, d.source, d.licence && `licence: ${d.licence}`].filter(Boolean);
    return bits.join(", ");
  });
  dom.credits.textContent = `decodelab ${info.version || ""}.${parts.length ? ` Training text: ${parts.join("; ")}.` : ""}`;
}

function setEnabled(on) {
  for (const control of Object.values(controls)) control.disabled = !on;
  dom.reset.disabled = !on;
  dom.slider.disabled = !on;
  dom.slow.disabled = !on;
  dom.trainText.disabled = !on;
  dom.trainButton.disabled = !on;
  dom.generate.disabled = !on;
  dom.stop.disabled = true;
}

// --- form values ----------------------------------------------------------------------------

function applySettings(given) {
  const values = state.locks ? { ...given, ...state.locks } : given;
  for (const [name, value] of Object.entries(values)) {
    const control = controls[name];
    if (!control) continue;
    if (control.type === "checkbox") control.checked = Boolean(value);
    else if (name === "stop") control.value = (value || []).join("\n");
    else control.value = value == null ? "" : String(value);
  }
  for (const name of FIELD_NAMES) showError(name, null);
  // a dataset given without a tokenizer takes its own (the tasks data reads BPE only)
  if ("dataset" in values && !("tokenizer" in values)) fitDataset();
  showTools();
  describeDataset();
  updateGreedyNotes();
  syncSlider();
  countChanged();
  lesson.settingsChanged();
}

function checkOne(name) {
  const spec = state.specs[name];
  const control = controls[name];
  if (!spec || !control) return { value: control && readRaw(control) };
  const ctx = { badInput: control.validity && control.validity.badInput };
  const data = state.datasets[controls.dataset.value];
  // byte-level BPE reads any text; characters only the ones the corpus has
  if (name === "prompt" && controls.tokenizer.value !== "bpe") ctx.vocab = vocabOf(data);
  if (name === "tokenizer") ctx.choices = (data && data.tokenizers) || ["chars", ...(data && data.bpe ? ["bpe"] : [])];
  if (name === "dataset") ctx.choices = [...controls.dataset.options].map((o) => o.value);
  if (name === "model") ctx.choices = [...controls.model.options].map((o) => o.value);
  return checkField(spec, readRaw(control), ctx);
}

function readRaw(control) {
  return control.type === "checkbox" ? control.checked : control.value;
}

/** Check every field; show each error next to its field. Returns {settings} or {errors}. */
function collect() {
  const result = peek();
  for (const name of FIELD_NAMES) showError(name, (result.errors || {})[name] || null);
  return result;
}

/** The form's settings, checked, without marking anything: {settings} or {errors}. */
function peek() {
  const settings = {};
  const errors = {};
  for (const name of FIELD_NAMES) {
    const result = checkOne(name);
    if (result.error) errors[name] = result.error;
    else settings[name] = result.value;
  }
  Object.assign(errors, checkTogether(settings));
  return Object.keys(errors).length ? { errors } : { settings };
}

function showError(name, message) {
  const control = name === "text" ? dom.trainText : controls[name];
  const box = $(`${control.id}-error`);
  if (!box) return;
  if (message) state.errors[name] = message;
  else delete state.errors[name];
  box.textContent = message || "";
  box.hidden = !message;
  if (message) control.setAttribute("aria-invalid", "true");
  else control.removeAttribute("aria-invalid");
  control.closest(".field").classList.toggle("has-error", Boolean(message));
  // an error from a link, a script or a host page for a rule behind More rules: open it, so
  // the message is seen next to its field
  const folded = message && control.closest("details:not([open])");
  if (folded) folded.open = true;
  describe(control);
}

// aria-describedby lists only what is visible: the hint, a "not used" note, the error.
function describe(control) {
  const ids = [`${control.id}-hint`, `${control.id}-na`, `${control.id}-error`]
    .filter((id) => { const node = $(id); return node && !node.hidden; });
  control.setAttribute("aria-describedby", ids.join(" "));
}

function validateField(name) {
  if (!state.info) return;
  showError(name, checkOne(name).error || null);
  if (name === "max_new_tokens" || name === "min_new_tokens") {
    // Min new tokens must not exceed max new tokens: re-check the pair together.
    const max = checkOne("max_new_tokens");
    const min = checkOne("min_new_tokens");
    const together = checkTogether({ max_new_tokens: max.value, min_new_tokens: min.value });
    showError("min_new_tokens", min.error || together.min_new_tokens || null);
  }
}

// Greedy (or temperature 0) makes temperature and the filters irrelevant: say so beside them.
function updateGreedyNotes() {
  const greedyOn = controls.greedy.checked;
  const tempZero = !greedyOn && controls.temperature.value.trim() !== "" && Number(controls.temperature.value) === 0;
  for (const name of SAMPLING_ONLY) {
    const field = controls[name].closest(".field");
    const note = $(`${controls[name].id}-na`);
    let text = null;
    if (greedyOn) text = name === "temperature" ? "Not used: greedy is on." : "Not used in greedy mode.";
    else if (tempZero && name !== "temperature") text = "Not used: temperature 0 means greedy.";
    field.classList.toggle("not-applying", Boolean(text));
    note.hidden = !text;
    note.textContent = text || "";
    describe(controls[name]);
  }
}

// A dataset read by one tokenizer only (the tasks data: BPE with its special tokens) takes it
// when chosen, and a question model gets a question to start from if the prompt is empty.
function fitDataset() {
  const d = state.datasets[controls.dataset.value];
  if (!d) return;
  const tokenizers = d.tokenizers || ["chars"];
  // a tokenizer an embed keeps fixed stays; a mismatch is then named when the run is checked
  if (!tokenizers.includes(controls.tokenizer.value) && !hooks.isLocked("tokenizer")) controls.tokenizer.value = tokenizers[0];
  if (d.tools && !controls.prompt.value.trim() && d.sample_question && !hooks.isLocked("prompt")) controls.prompt.value = d.sample_question;
  showTools();
}

// The tool-call setting matters only for a model that can call a tool.
function showTools() {
  const d = state.datasets[controls.dataset.value];
  dom.toolsField.hidden = !(d && d.tools);
}

function describeDataset() {
  const name = controls.dataset.value;
  const d = state.datasets[name];
  if (!d) return;
  const lines = [];
  if (d.description) lines.push(d.description);
  if (Array.isArray(d.examples) && d.examples.length) {
    const shown = [];
    for (const x of d.examples) {
      const short = x.length > 48 ? `${x.slice(0, 47)}…` : x;
      if (shown.length && shown.join("").length + short.length > 60) break;
      shown.push(short);
    }
    lines.push(`For example: ${shown.join(" · ")}`);
  }
  const facts = [];
  const known = vocabOf(d);
  const vocab = known ? known.chars : [];
  const bpe = controls.tokenizer.value === "bpe" && d.bpe;
  if (vocab.length) facts.push(`${vocab.length} characters`);
  if (d.n_train != null) facts.push(`${d.n_train.toLocaleString("en")} training examples`);
  const nll = d.val_nll != null && typeof d.val_nll === "object" ? d.val_nll[controls.model.value] : d.val_nll;
  if (nll != null && !bpe) facts.push(`held-out loss ${fixed(nll, 2)} nats per character`);
  if (facts.length) lines.push(facts.join(" · ") + ".");
  dom.datasetHint.replaceChildren(...lines.map((line, i) => (i ? [el("br"), line] : [line])).flat());
  if (bpe) {
    dom.vocabList.replaceChildren(...d.bpe.first_merges.map((c) => el("span", "chip", readable(c))));
    dom.vocabSummary.textContent = `Tokens this model knows (${d.bpe.vocab_size})`;
    dom.vocabWords.textContent = `Any text: end-of-sequence, the 256 bytes (so nothing is ever unknown) and ${d.bpe.vocab_size - 257} pieces learned from the training text by merging the most frequent pairs. The first ones learned:`;
  } else {
    dom.vocabList.replaceChildren(...vocab.map((c) => el("span", "chip", readable(c))));
    dom.vocabSummary.textContent = `Characters this model knows (${vocab.length})`;
    dom.vocabWords.textContent = known ? `${known.words}. The prompt may use only these.` : "";
  }
  const modelId = controls.model.value;
  const model = (state.info.models || []).find((m) => m.id === modelId);
  dom.modelHint.textContent = (model && model.description) || MODEL_HINTS[modelId] || "The model that scores each possible next character.";
}

let debounce = null;
dom.form.addEventListener("input", (event) => {
  const name = event.target.name;
  if (!FIELD_NAMES.includes(name)) return;
  if (name === "temperature") syncSlider();
  if (MORE_RULES.includes(name)) countChanged();
  lesson.settingsChanged(); // the next token, redrawn under the rules as they are now
  if (name === "greedy" || name === "temperature") updateGreedyNotes();
  clearTimeout(debounce);
  if (state.errors[name]) validateField(name); // clear a fixed error at once
  else debounce = setTimeout(() => validateField(name), 350);
});

dom.form.addEventListener("change", (event) => {
  const name = event.target.name;
  if (!FIELD_NAMES.includes(name)) return;
  clearTimeout(debounce);
  validateField(name);
  if (name === "dataset") fitDataset();
  if (name === "dataset" || name === "model" || name === "tokenizer") {
    describeDataset();
    validateField("prompt"); // the characters allowed depend on the dataset and tokenizer
    if (name !== "tokenizer") validateField("tokenizer");
  }
  if (name === "greedy" || name === "temperature") updateGreedyNotes();
});

dom.reset.addEventListener("click", () => {
  if (state.info) applySettings(state.baseline || state.info.defaults || {});
});

// --- generation -------------------------------------------------------------------------------

// Generate with the form as it is: checked first, each error next to its field.
function generateFromForm() {
  if (root.dataset.state !== "ready") return Promise.resolve({ status: "busy" });
  dom.formError.hidden = true;
  const result = collect();
  if (result.errors) {
    // a setting whose control is not shown (an embed's fixed one) is named under the form
    const hidden = Object.entries(result.errors).filter(([name]) => hooks.isLocked(name));
    if (hidden.length) {
      dom.formError.textContent = hidden.map(([, message]) => message).join(" ");
      dom.formError.hidden = false;
    }
    const first = FIELD_NAMES.find((name) => result.errors[name] && !hooks.isLocked(name));
    if (first) {
      if (dom.moreRules.contains(controls[first])) dom.moreRules.open = true;
      controls[first].focus();
    }
    const errors = Object.entries(result.errors).map(([field, message]) => ({ field, message }));
    hooks.lastRun = Promise.resolve({ status: "invalid", errors });
    return hooks.lastRun;
  }
  return startRun(result.settings);
}

dom.form.addEventListener("submit", (event) => {
  event.preventDefault();
  generateFromForm();
});

// Enter in a field generates (the form's own submit); Ctrl+Enter (or ⌘+Enter) does it from
// anywhere, the stop strings' box included, where Enter starts a new line.
document.addEventListener("keydown", (event) => {
  if (event.key !== "Enter" || !(event.ctrlKey || event.metaKey) || event.defaultPrevented) return;
  event.preventDefault();
  generateFromForm();
});

// --- the temperature slider and "More rules" ----------------------------------------------------

// The slider and the number box are one setting: moving one moves the other (the box is what is
// read and checked; the slider covers the usual range).
dom.slider.addEventListener("input", () => {
  controls.temperature.value = dom.slider.value;
  controls.temperature.dispatchEvent(new Event("input", { bubbles: true }));
});

function syncSlider() {
  const t = Number(controls.temperature.value);
  if (controls.temperature.value.trim() !== "" && Number.isFinite(t)) dom.slider.value = String(Math.min(t, Number(dom.slider.max)));
}

// "More rules (2 changed)": how many of the rules behind it differ from their defaults.
function countChanged() {
  const defaults = (state.info && state.info.defaults) || {};
  const changed = MORE_RULES.filter((name) => {
    const control = controls[name];
    const now = control.type === "checkbox" ? control.checked : control.value.trim();
    const was = defaults[name];
    return control.type === "checkbox" ? now !== Boolean(was) : Number.isFinite(Number(now)) && typeof was === "number" ? Number(now) !== was : now !== String(was ?? "");
  }).length;
  dom.moreCount.textContent = changed ? `(${changed} changed)` : "(as they come)";
  dom.moreRules.dataset.changed = String(changed);
}

// Send settings to Python (which checks them again) and start a run.
function startRun(settings) {
  const id = state.nextId++;
  hooks.lastRun = new Promise((resolve) => {
    state.pending = { id, resolve, settings };
  });
  setState("generating");
  dom.generate.disabled = true;
  dom.stop.disabled = false;
  worker.postMessage({ type: "generate", id, settings, pace_ms: dom.slow.checked ? SLOW_MS : 0 });
  emit("run-start", { settings });
  hooks.lastRun.then((result) => emit("run-end", result));
  return hooks.lastRun;
}

dom.stop.addEventListener("click", () => {
  const id = state.run && !state.run.done ? state.run.id : state.pending && state.pending.id;
  if (id == null) return;
  worker.postMessage({ type: "stop", id });
  dom.stop.disabled = true;
  dom.finishText.textContent = "Stopping…";
});

function onStarted(m) {
  const pending = state.pending;
  if (!pending || pending.id !== m.id) return;
  state.pending = null;
  state.run = {
    id: m.id,
    resolve: pending.resolve,
    settings: m.settings || pending.settings,
    steps: [],
    queue: [], // generated characters not yet released as visible text: {ch, step}
    shownChars: 0, // visible characters so far
    charsOf: [], // step index -> number of its characters already shown
    spans: new Map(), // step index -> its span in the text
    selected: null,
    follow: true,
    done: false,
    startedAt: performance.now(),
  };
  const set = state.run.settings;
  state.run.greedy = Boolean(set.greedy) || Number(set.temperature) === 0;
  state.run.healed = m.healed == null ? null : m.healed;
  const s = state.run.settings;
  dom.textPlaceholder.hidden = true;
  dom.text.hidden = false;
  showPrompt(s.prompt || "", m.prompt_tokens, m.healed);
  dom.textPrompt.title = s.prompt ? "Prompt" : "Start of a sequence (empty prompt)";
  dom.textGen.replaceChildren();
  showUnshown(state.run);
  dom.endMarker.hidden = true;
  dom.exportButton.disabled = true;
  dom.runMeta.textContent = "";
  dom.finishText.textContent = "Generating…";
  dom.finishCode.hidden = true;
  showVerdict(null);
  dom.finishText.parentElement.classList.remove("idle");
  lesson.runStarted(state.run);
  kv.runStarted(state.run);
  renderInspector();
}

// The prompt, one span per token (shaded when tokens are shown); a healed last token is
// marked as taken back.
function showPrompt(prompt, pieces, healed) {
  if (!Array.isArray(pieces) || pieces.join("") + (healed || "") !== prompt) {
    dom.textPrompt.textContent = prompt;
    return;
  }
  const spans = pieces.map((piece, i) => el("span", `ptok${(pieces.length - i) % 2 ? " tok-odd" : ""}`, piece));
  if (healed) {
    const span = el("span", "ptok healed", healed);
    span.title = "Taken back by token healing: the first new token redoes it";
    spans.push(span);
  }
  dom.textPrompt.replaceChildren(...spans);
}

function onSteps(m) {
  const run = state.run;
  if (!run || run.id !== m.id) return;
  textStream.update(run);
  for (const step of m.steps) addStep(run, step);
  showUnshown(run);
  if (run.follow && run.steps.length) run.selected = run.steps.length - 1;
  kv.steps(run);
  // While a run streams, the inspector and the timeline follow it ten times a second, not every
  // frame: each redraw costs layout, and the text itself keeps streaming in between.
  const now = performance.now();
  if (!run.followedAt || now - run.followedAt >= 100 || !run.follow) {
    run.followedAt = now;
    scheduleInspector();
  }
}

// Streaming text: each step's `emit` is the text released at that step. Stop-string hold-back
// can delay characters, so released characters are matched back to the steps that chose them.
function addStep(run, step) {
  const index = run.steps.length;
  run.steps.push(step);
  run.charsOf[index] = 0;
  if (step.part === "call" || step.part === "result") return addPart(run, index, step);
  // the characters this token completed (a BPE token can end inside a character, and a
  // healed first token leaves out what the prompt already shows)
  const piece = step.piece != null ? step.piece : step.token_text === "<eos>" ? "" : step.token_text;
  for (const ch of piece) run.queue.push({ ch, step: index });
  for (const ch of step.emit || "") {
    const head = run.queue[0];
    const owner = head && head.ch === ch ? run.queue.shift().step : index;
    appendChar(run, owner, ch);
  }
}

// What was generated but is not in the text: the tail held back in case it starts a stop string
// (while the run goes on), and what a stop string cut (at the end). Both are shown after the
// text, marked, and each character still selects the step that chose it.
function unshownSpans(run) {
  const spans = [];
  for (const { ch, step } of run.queue) {
    let span = spans[spans.length - 1];
    if (!span || span.dataset.step !== String(step)) {
      span = el("span", "tok unshown");
      span.dataset.step = String(step);
      span.setAttribute("role", "button");
      span.tabIndex = -1;
      spans.push(span);
    }
    span.textContent += ch;
  }
  return spans;
}

function showUnshown(run) {
  const cut = run.done && run.finish ? run.finish.cut || "" : "";
  const held = run.done ? "" : run.queue.map((q) => q.ch).join("");
  dom.textHeld.hidden = !held;
  dom.textHeld.replaceChildren(...(held ? unshownSpans(run) : []));
  dom.textHeld.title = held ? "Held back for now: it may be the start of a stop string" : "";
  dom.textCut.hidden = !cut;
  if (!cut) return dom.textCut.replaceChildren();
  const spans = unshownSpans(run);
  const struck = el("s", "cut-chars");
  if (spans.map((x) => x.textContent).join("") === cut) struck.append(...spans);
  else struck.textContent = cut;
  dom.textCut.replaceChildren(struck, el("span", "cut-label", `cut: the stop string “${readable(run.finish.stop_reason)}”`));
}

// A tool call and its result are not answer text: each of their tokens gets a span of its own,
// drawn as part of a calculator chip (the markers as "calculator(", ")" and " = "), and stays
// clickable like any other step.
const PART_MARKS = { "<|call|>": "calculator(", "<|/call|>": ")", "<|result|>": " = ", "<|/result|>": "" };
function addPart(run, index, step) {
  const mark = PART_MARKS[step.token_text];
  const opens = step.token_text === "<|call|>" ? " part-open" : step.token_text === "<|/result|>" ? " part-close" : "";
  const span = el("span", `tok part part-${step.part}${step.source === "tool" ? " by-tool" : ""}${mark != null ? " part-mark" : ""}${opens}`);
  span.setAttribute("role", "button");
  span.tabIndex = -1;
  span.dataset.step = String(index);
  span.setAttribute("aria-pressed", "false");
  span.textContent = mark != null ? mark : step.piece || "";
  if (step.token_text === "<|/result|>") span.setAttribute("aria-label", "end of the result");
  run.spans.set(index, span);
  textStream.add(span);
}

function appendChar(run, index, ch) {
  let span = run.spans.get(index);
  if (!span) {
    span = el("span", "tok");
    span.setAttribute("role", "button");
    span.tabIndex = -1;
    span.dataset.step = String(index);
    if (index % 2) span.classList.add("tok-odd"); // token boundaries, when they are shown
    span.setAttribute("aria-pressed", "false");
    run.spans.set(index, span);
    textStream.add(span); // into the text at the next flush, about 30 times a second
  }
  span.textContent += ch;
  const names = { " ": "space", "\n": "newline", "\t": "tab" };
  if (names[span.textContent]) {
    span.setAttribute("aria-label", names[span.textContent]);
    span.classList.add(span.textContent === "\n" ? "nl" : "ws");
  }
  run.charsOf[index] += 1;
  run.shownChars += 1;
}

// An answer meant to be JSON (JSON mode, or a card question), classified by Python at the end.
const VERDICTS = { valid: "Valid JSON: one complete object.", incomplete: "Incomplete JSON: ", malformed: "Malformed JSON: " };

function showVerdict(json) {
  const status = json && json.status;
  dom.jsonVerdict.hidden = !status;
  if (!status) return;
  dom.jsonVerdict.dataset.status = status;
  dom.jsonVerdict.textContent = status === "valid" ? VERDICTS.valid : `${VERDICTS[status]}${json.error}.`;
}

function onDone(m) {
  const run = state.run;
  if (!run || run.id !== m.id) return;
  run.done = true;
  run.finish = { finish_reason: m.finish_reason, stop_reason: m.stop_reason, text: m.text, cut: m.cut || "" };
  // Text released by the ending itself (e.g. held back for a possible stop string, then let
  // go by a cancel) arrives only in the final text: append what is not on screen yet.
  textStream.flush();
  const shown = dom.textGen.textContent;
  if (typeof m.text === "string" && m.text.length > shown.length && m.text.startsWith(shown)) {
    for (const ch of m.text.slice(shown.length)) {
      const head = run.queue[0];
      appendChar(run, head && head.ch === ch ? run.queue.shift().step : run.steps.length - 1, ch);
    }
  }
  showUnshown(run);
  const elapsed = performance.now() - run.startedAt;
  dom.finishText.textContent = finishSentence(m.finish_reason, m.stop_reason, run.settings.max_new_tokens);
  dom.finishCode.textContent = finishCode(m.finish_reason, m.stop_reason); // as the trace says it
  dom.finishCode.hidden = false;
  showVerdict(m.json);
  dom.runMeta.textContent = `${plural(run.steps.length, "step", "steps")} · ${seconds(elapsed)}`;
  const last = run.steps.length - 1;
  if (last >= 0) {
    const lastStep = run.steps[last];
    dom.endMarker.hidden = false;
    dom.endMarker.dataset.step = String(last);
    // The visible words start the accessible name (WCAG 2.5.3); the rest is for screen readers.
    const eos = lastStep.token_text === "<eos>";
    dom.endMarker.replaceChildren(
      el("span", null, eos ? `◼ end · step ${last + 1}` : `Last step: ${last + 1}`),
      el("span", "visually-hidden", eos ? " (inspect the step where end-of-sequence was chosen)" : " (inspect it)"),
    );
  }
  dom.exportButton.disabled = false;
  textStream.finish(run);
  finishRun();
  lesson.runDone(run);
  kv.runDone(run);
  scheduleInspector();
  run.resolve({
    status: "done", id: run.id, finish_reason: m.finish_reason, stop_reason: m.stop_reason,
    text: m.text, cut: m.cut || "", steps: run.steps.length, settings: run.settings, json: m.json || null,
  });
}

function onInvalid(m) {
  const pending = state.pending;
  if (!pending || pending.id !== m.id) return;
  state.pending = null;
  // A field typed in just before still has its own check waiting (the input debounce): it would
  // run on the form's value and wipe the error just placed, so it is dropped.
  clearTimeout(debounce);
  // The last good output stays on screen; each error goes next to its field.
  const unplaced = [];
  for (const error of m.errors || []) {
    // a setting whose control is not shown (an embed's locked one) is named under the form
    if (controls[error.field] && !hooks.isLocked(error.field)) showError(error.field, error.message);
    else unplaced.push(error.message);
  }
  dom.formError.hidden = !unplaced.length;
  dom.formError.textContent = unplaced.join(" ");
  const first = FIELD_NAMES.find((name) => state.errors[name]);
  if (first) controls[first].focus();
  finishRun();
  pending.resolve({ status: "invalid", errors: m.errors || [] });
}

function onError(m) {
  const reply = replies.get(m.id);
  if (reply) {
    replies.delete(m.id);
    reply.reject(new Error(m.message));
    return;
  }
  const pending = state.pending && state.pending.id === m.id ? state.pending : null;
  const run = state.run && state.run.id === m.id && !state.run.done ? state.run : null;
  if (!pending && !run) return;
  const target = pending || run;
  state.pending = null;
  if (run) run.done = true;
  dom.finishText.textContent = `Something went wrong in Python: ${m.message} Your settings are kept, so you can try again.`;
  finishRun();
  if (run) kv.runDone(run); // the cache card says the run was cut off
  target.resolve({ status: "error", message: m.message });
}

function finishRun() {
  if (root.dataset.state === "generating") setState("ready");
  dom.generate.disabled = false;
  dom.stop.disabled = true;
}

// --- export -------------------------------------------------------------------------------

dom.exportButton.addEventListener("click", async () => {
  dom.exportButton.disabled = true;
  try {
    const json = await hooks.trace();
    const url = URL.createObjectURL(new Blob([json], { type: "application/json" }));
    const link = el("a");
    link.href = url;
    link.download = "decodelab-trace.json";
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (err) {
    dom.runMeta.textContent = `The trace could not be exported: ${err.message}`;
  } finally {
    dom.exportButton.disabled = false;
  }
});

// --- choosing a step ------------------------------------------------------------------------

function select(index, { focus = false } = {}) {
  const run = state.run;
  if (!run || index == null || index < 0 || index >= run.steps.length) return;
  run.selected = index;
  run.follow = false;
  renderInspector();
  emit("select", { step: index });
  if (focus) {
    const span = run.spans.get(index);
    if (span) span.focus();
  }
}

dom.text.addEventListener("click", (event) => {
  const span = event.target.closest(".tok");
  if (span) select(Number(span.dataset.step), { focus: true });
});

dom.textGen.addEventListener("keydown", (event) => {
  const span = event.target.closest(".tok");
  const run = state.run;
  if (!span || !run) return;
  const visible = [...run.spans.keys()];
  const at = visible.indexOf(Number(span.dataset.step));
  let target = null;
  if (event.key === "ArrowRight" || event.key === "ArrowDown") target = visible[Math.min(at + 1, visible.length - 1)];
  else if (event.key === "ArrowLeft" || event.key === "ArrowUp") target = visible[Math.max(at - 1, 0)];
  else if (event.key === "Home") target = visible[0];
  else if (event.key === "End") target = visible[visible.length - 1];
  else if (event.key === "Enter" || event.key === " ") target = visible[at];
  if (target == null) return;
  event.preventDefault();
  select(target, { focus: true });
});

dom.prevStep.addEventListener("click", () => state.run && select(state.run.selected - 1));
dom.nextStep.addEventListener("click", () => state.run && select(state.run.selected + 1));
dom.showTokens.addEventListener("change", () => dom.text.classList.toggle("show-tokens", dom.showTokens.checked));
dom.endMarker.addEventListener("click", () => select(Number(dom.endMarker.dataset.step)));

let inspectorFrame = 0;
function scheduleInspector() {
  if (inspectorFrame) return;
  // While a run streams, the inspector updates in a task of its own, not inside the frame that
  // also draws the new text: two short tasks instead of one long one. The inspector's layout is
  // done in that task too (it is most of the inspector's cost: a table, a strip, notes); left to
  // the next frame, it would land on top of the text drawn there.
  const streaming = state.run && !state.run.done;
  inspectorFrame = (streaming ? setTimeout : requestAnimationFrame)(() => {
    inspectorFrame = 0;
    renderInspector();
    if (streaming) dom.inspectorBody.getBoundingClientRect();
  });
}

// --- the step inspector -------------------------------------------------------------------

function renderInspector() {
  const run = state.run;
  const step = run && run.selected != null ? run.steps[run.selected] : null;
  dom.inspectorEmpty.hidden = Boolean(step);
  dom.inspectorBody.hidden = !step;
  dom.prevStep.disabled = !step || run.selected === 0;
  dom.nextStep.disabled = !step || run.selected >= run.steps.length - 1;
  dom.stepCount.textContent = step ? `Step ${run.selected + 1} of ${run.steps.length}` : "";
  dom.stepper.hidden = !step;
  if (run) markSelected(run);
  lesson.selected(run);
  if (!step) return;

  if (step.source === "tool") return renderToolStep(run, step);
  dom.candsTable.hidden = dom.candsLegend.hidden = false;
  const s = run.settings;
  const greedy = Boolean(s.greedy) || Number(s.temperature) === 0;
  const chosen = step.top.find((c) => c.token_id === step.token_id);

  // One sentence that says what happened, and how sure it was (stepOdds: in greedy mode there is
  // no draw, so the odds are the model's own).
  const odds = stepOdds(step, greedy);
  let summary;
  if (step.u == null) summary = `Greedy: took the argmax, the candidate the model itself rated highest, ${spoken(step.token_text)}, at ${pct(odds.p)}.`;
  else summary = `The draw u = ${fixed(step.u, 4)} picked ${spoken(step.token_text)}, which had a ${pct(step.prob)} chance after the rules (the model alone gave it ${pct(Math.exp(step.logprob))}).`;
  if (step.token_text === "<eos>") summary += " That ends the text.";
  dom.stepSummary.textContent = summary;

  const V = vocabSize(run);
  const stats = [
    ["Chosen", readable(step.token_text)],
    greedy ? ["Model’s chance", pct(odds.p)] : ["Chance", pct(step.prob)],
    ["Draw u", step.u == null ? "none" : fixed(step.u, 4)],
    [greedy ? "Model’s entropy" : "Entropy", `${fixed(odds.entropy, 2)} nats`],
    ["Kept", V ? `${step.kept_count} of ${V}` : String(step.kept_count)],
    cacheStat(step),
  ].filter(Boolean);
  dom.stats.replaceChildren(...stats.map(([term, value]) => {
    const div = el("div", "stat");
    div.append(el("dt", null, term), el("dd", null, value));
    return div;
  }));

  dom.stepNotes.replaceChildren(...[...stepNotes(run, step, greedy), ...cacheNotes(step, state.info.cache_tolerance)].map((text) => el("span", "note-line", text)));
  dom.stepNotes.hidden = !dom.stepNotes.childNodes.length;

  dom.candsCaption.textContent = `Step ${run.selected + 1}: the ${plural(step.top.length, "likeliest candidate", "likeliest candidates")} and their probabilities at each stage`;
  dom.candRows.replaceChildren(...candidateRows(step, greedy));
  const listed = step.top.length;
  let note = V && listed < V ? `The ${listed} likeliest of ${V} candidates after temperature` : "All candidates";
  if (chosen && step.top.indexOf(chosen) >= state.info.top_n) note += ", plus the chosen one";
  note += ".";
  if (greedy) note += " Greedy takes the top of the model's own column; the final column puts all the weight on it.";
  dom.tableNote.textContent = note;

  renderDraw(step);
}

// A token the program appended after a tool call: no rule chose it, so there is nothing to
// draw but where it came from and what the cache did with it.
function renderToolStep(run, step) {
  const call = step.tool_call;
  const what = call && call.by === "tool"
    ? (call.error ? `the calculator’s error for the call ${quoteText(call.call)}` : `the calculator’s answer to ${quoteText(call.call)}, ${quoteText(call.result)}`)
    : "the marker that opens a result, so the model must write the result itself (tools: guess)";
  dom.stepSummary.textContent = `Not chosen by the model: the program appended ${spoken(step.token_text)} as part of ${what}. The model closed its call, generation paused, and these tokens were fed in one pass; then the model went on from the same cache.`;
  const stats = [["Token", readable(step.token_text)], ["Written by", "the tool runtime"], ["Draw u", "none"], cacheStat(step)].filter(Boolean);
  dom.stats.replaceChildren(...stats.map(([term, value]) => {
    const div = el("div", "stat");
    div.append(el("dt", null, term), el("dd", null, value));
    return div;
  }));
  const notes = [...tokenNotes(run, step), ...cacheNotes(step, state.info.cache_tolerance)];
  if (step.cache_length != null) notes.push(`The cache now holds ${step.cache_length} positions: only the appended tokens were computed, everything before them was read from the cache.`);
  dom.stepNotes.replaceChildren(...notes.map((text) => el("span", "note-line", text)));
  dom.stepNotes.hidden = !notes.length;
  dom.candsCaption.textContent = `Step ${run.selected + 1}: no candidates`;
  dom.candRows.replaceChildren();
  dom.candsTable.hidden = dom.candsLegend.hidden = true;
  dom.tableNote.textContent = "No rule chose this token, so there are no probabilities to show. The next step the model takes starts from logits computed after it.";
  renderDraw(step);
}

function quoteText(text) {
  return `“${text == null ? "" : text}”`;
}

// Only the selected character is marked, and only it (or the first) is in the tab order; the
// arrow keys move between characters.
function markSelected(run) {
  textStream.reveal(run, run.selected);
  const span = run.spans.get(run.selected) || null;
  if (run.marked && run.marked !== span) {
    run.marked.classList.remove("selected");
    run.marked.setAttribute("aria-pressed", "false");
  }
  if (span) {
    span.classList.add("selected");
    span.setAttribute("aria-pressed", "true");
  }
  run.marked = span;
  const tabbable = span || run.spans.values().next().value || null;
  if (run.tabbable && run.tabbable !== tabbable) run.tabbable.tabIndex = -1;
  if (tabbable) tabbable.tabIndex = 0;
  run.tabbable = tabbable;
}

function vocabSize(run) {
  const d = state.datasets[run.settings.dataset];
  if (d && run.settings.tokenizer === "bpe") return d.bpe ? d.bpe.vocab_size : null;
  return d && Array.isArray(d.vocab) ? d.vocab.length : null;
}

// What a BPE token was made of, and what became of it: its bytes, the characters it carried,
// the healed first token, a stop string that began inside it.
function tokenNotes(run, step) {
  const notes = [];
  const hex = step.token_bytes || "";
  const n = hex.length / 2;
  if (run.settings.tokenizer !== "bpe" || step.token_text === "<eos>") return notes;
  if (!n) {
    notes.push("A special token: an id of its own after the learned merges, with no text. Nothing typed into a prompt can produce it; only the model or the program that runs the tool puts it in the sequence.");
    return notes;
  }
  const bytes = hex.match(/../g).join(" ");
  const piece = step.piece || "";
  const carried = [...piece].length;
  if (step.step === 0 && run.healed != null) {
    notes.push(`Token healing: the prompt’s last token ${spoken(run.healed)} was taken back, and this first token had to start with it. The text shows only what comes after it.`);
  }
  let words = `This token is ${plural(n, "byte", "bytes")} (${bytes})`;
  if (carried > 0) words += `; it completed ${plural(carried, "character", "characters")}.`;
  else if (step.step === 0 && run.healed != null) words += ", exactly the text healing took back, so it adds nothing new.";
  else words += ", and no whole character: it ends inside one, so the text waits for the next token to finish it.";
  notes.push(words);
  // where a stop string cut the text: the last step's record says in which token
  const last = run.done ? run.steps[run.steps.length - 1] : null;
  const cut = last && last.stop_at;
  if (cut && cut.step === step.step && cut.byte < n) {
    notes.push(`The visible text ends ${cut.byte ? `after ${plural(cut.byte, "byte", "bytes")} of this token` : "just before this token"}: a stop string begins inside it, so the token is cut in two.`);
  }
  return notes;
}

function stepNotes(run, step, greedy) {
  const s = run.settings;
  const notes = [];
  if (step.phase === "prefill") {
    notes.push(PREFILL_NOTES[s.model] || "First step: the model has read the prompt (prefill). Each later step feeds in the character just chosen (decode).");
  }
  if (s.ignore_eos || step.step < (s.min_new_tokens || 0)) {
    notes.push(s.ignore_eos
      ? "Ignore EOS is on: end-of-sequence is blocked, so it gets probability 0 after the model column."
      : "Min new tokens: end-of-sequence is still blocked at this step, so it gets probability 0 after the model column.");
  }
  if (Number(s.repetition_penalty) !== 1) {
    notes.push("Repetition penalty is on: characters already used were marked down before temperature, so the middle column includes it.");
  }
  if (step.orders_differ) {
    const other = s.order === "filter-first" ? "temperature-first" : "filter-first";
    notes.push(`The other order (${other}) would keep a different set of candidates at this step.`);
  }
  // Characters that never reached the visible text.
  notes.push(...tokenNotes(run, step));
  if (step.part === "call") notes.push("Part of a tool call: this token went to the call the calculator reads, not to the answer’s text.");
  if (step.part === "result") notes.push("The model is writing the tool’s result itself (tool calls: guess): no calculator checks it.");
  const inAnswer = !step.part || step.part === "answer";
  if (inAnswer && step.token_text !== "<eos>" && run.charsOf[run.selected] === 0 && (step.piece == null || step.piece)) {
    if (!run.done) notes.push("Held back for now: it may be the start of a stop string.");
    else if (run.finish && run.finish.finish_reason === "stop" && run.finish.stop_reason !== "eos") {
      notes.push(`Part of the stop string “${readable(run.finish.stop_reason)}”, so it was cut from the text.`);
    }
  }
  if (greedy && step.u == null && Number(s.temperature) === 0 && !s.greedy) {
    notes.push("Temperature 0 means greedy: no random draw.");
  }
  return notes;
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

// --- train on your own text -----------------------------------------------------------------

let training = false;

dom.trainForm.addEventListener("submit", (event) => {
  event.preventDefault();
  if (!state.info || training) return;
  showError("text", null);
  training = true;
  dom.trainButton.disabled = true;
  dom.trainResult.textContent = "Counting…";
  call("train", { text: dom.trainText.value })
    .then((reply) => (reply.ok ? onTrained(reply.dataset) : onTrainInvalid(reply.errors)))
    .catch((err) => {
      dom.trainResult.textContent = `Training failed: ${err.message}`;
    })
    .finally(() => {
      training = false;
      dom.trainButton.disabled = false;
    });
});

function onTrained(d) {
  const name = d.name || "custom";
  state.datasets[name] = { ...d, label: "Your text" };
  let option = [...controls.dataset.options].find((o) => o.value === name);
  if (!option) {
    option = el("option", null, "Your text");
    option.value = name;
    controls.dataset.append(option);
  }
  controls.dataset.value = name;
  describeDataset();
  validateField("dataset");
  validateField("prompt");
  const facts = [];
  if (d.n_train != null) facts.push(plural(d.n_train, "example", "examples"));
  if (Array.isArray(d.vocab)) facts.push(plural(d.vocab.length - 1, "character", "characters"));
  dom.trainResult.textContent = `Trained${facts.length ? ` on ${facts.join(" with ")}` : ""}. The dataset is now “Your text”.`;
}

function onTrainInvalid(errors) {
  dom.trainResult.textContent = "";
  showError("text", errors.map((e) => e.message).join(" ") || "This text cannot be used.");
  dom.trainText.focus();
}

// --- announcing, sharing, exporting, embedding: their own modules, built on the hooks ---------

installA11y(hooks);
installUrlState(hooks);
installExports(hooks);
installEmbed(hooks);
installEmbedder(hooks);
