// The page's store (web/state/store.js) without a browser or Python: a stand-in for Python's
// check endpoint answers as the real one does in shape (errors by field, values, adjustments),
// so what is tested is the store's own work: who may write, what is announced, which messages
// are shown when, and that an answer to older settings never undoes newer ones.

import assert from "node:assert/strict";
import { test } from "node:test";

import { createStore } from "../../web/state/store.js";

const FIELDS = [
  { name: "dataset", kind: "choice" },
  { name: "tokenizer", kind: "choice" },
  { name: "prompt", kind: "text" },
  { name: "temperature", kind: "float" },
  { name: "max_new_tokens", kind: "int" },
  { name: "min_new_tokens", kind: "int" },
  { name: "stop", kind: "lines" },
  { name: "greedy", kind: "bool" },
];
const INFO = {
  fields: FIELDS,
  defaults: { dataset: "names", tokenizer: "chars", prompt: "", temperature: 1, max_new_tokens: 50, min_new_tokens: 0, stop: [], greedy: false },
  datasets: { names: { label: "Names" }, tasks: { label: "Tasks" } },
};
const NAMES = FIELDS.map((f) => f.name);

// Python's check, in miniature: a temperature must be a number from 0 to 100, min at most max;
// a change of dataset to "tasks" adjusts the tokenizer to bpe. more(settings): errors of a
// test's own.
function python({ delay = 0, more = () => [] } = {}) {
  const asked = [];
  const check = ({ settings, changed }) => {
    const errors = [...more(settings)];
    const t = Number(settings.temperature);
    if (!(String(settings.temperature).trim() !== "" && t >= 0 && t <= 100)) {
      errors.push({ field: "temperature", label: "Temperature", message: `Temperature must be a number from 0 to 100 (0 means greedy); got ${settings.temperature || "nothing"}.` });
    }
    if (Number(settings.min_new_tokens) > Number(settings.max_new_tokens)) {
      errors.push({ field: "min_new_tokens", label: "Min new tokens", message: "Min new tokens must be from 0 to Max new tokens.", also: ["max_new_tokens"] });
    }
    const adjust = changed === "dataset" && settings.dataset === "tasks" && settings.tokenizer !== "bpe" ? { tokenizer: "bpe" } : {};
    const values = {};
    for (const [k, v] of Object.entries({ ...settings, ...adjust })) if (!errors.some((e) => e.field === k)) values[k] = v;
    return { ok: true, errors, values, greedy: settings.greedy === true || t === 0, not_used: {}, applies: {}, adjust };
  };
  const call = (endpoint, request) => {
    asked.push({ endpoint, request: structuredClone(request) });
    const reply = check(request);
    return new Promise((resolve) => setTimeout(() => resolve(reply), delay));
  };
  return { call, asked };
}

async function started({ delay = 0, more } = {}) {
  const store = createStore();
  const py = python({ delay, more });
  store.connect(py.call);
  const changes = [];
  store.subscribe((change) => changes.push(change));
  await store.ready(INFO, [...NAMES, "not_a_field"]);
  return { store, py, changes };
}

test("ready puts Python's defaults in the form, as the controls show them", async () => {
  const { store, changes } = await started();
  const s = store.state;
  assert.deepEqual(s.names, NAMES); // a control with no field is no setting
  assert.equal(s.raw.temperature, "1");
  assert.equal(s.raw.greedy, false);
  assert.equal(s.raw.stop, "");
  assert.deepEqual(changes.map((c) => c.type), ["info", "settings", "checked"]);
  assert.deepEqual(store.values().stop, []); // as Python and a link read them: a list
});

test("an edit is checked after a pause; a change at once; only its own message is shown", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const store = createStore();
  const py = python();
  store.connect(py.call);
  const ready = store.ready(INFO, NAMES);
  t.mock.timers.tick(0);
  await ready;
  const before = py.asked.length;
  store.edit("temperature", "-1");
  assert.equal(py.asked.length, before); // not on every keystroke
  t.mock.timers.tick(349);
  assert.equal(py.asked.length, before);
  t.mock.timers.tick(1);
  assert.equal(py.asked.length, before + 1);
  t.mock.timers.tick(0);
  await store.settled();
  assert.match(store.state.errors.temperature, /^Temperature must be/);
  // a bad min new tokens is not shown while the learner types a temperature
  store.edit("min_new_tokens", "80", { commit: true });
  t.mock.timers.tick(0);
  await store.settled();
  assert.match(store.state.errors.min_new_tokens, /Min new tokens/);
  // fixing the temperature clears its message at once (no pause)
  store.edit("temperature", "0.7");
  t.mock.timers.tick(0);
  await store.settled();
  assert.equal(store.state.errors.temperature, undefined);
  assert.match(store.state.errors.min_new_tokens, /Min new tokens/);
});

test("a change shows and clears the messages of the errors Python says are about it too", async () => {
  // a pair of Python's that the page knows of only from its errors' `also`
  const more = (s) => (s.greedy === true && String(s.prompt) === "x"
    ? [{ field: "prompt", label: "Prompt", message: "Prompt x and greedy do not go together.", also: ["greedy"] }] : []);
  const { store } = await started({ more });
  const change = async (name, value) => {
    store.edit(name, value, { commit: true });
    await store.settled();
    return store.state.errors;
  };
  assert.match((await change("min_new_tokens", "80")).min_new_tokens, /Min new tokens/);
  // max new tokens raised past it: min's message goes, as Python's error said it was about max
  assert.equal((await change("max_new_tokens", "100")).min_new_tokens, undefined);
  // and lowered again: it comes back, next to min new tokens
  assert.match((await change("max_new_tokens", "60")).min_new_tokens, /Min new tokens/);
  assert.equal((await change("prompt", "x")).prompt, undefined);
  assert.equal((await change("greedy", true)).prompt, "Prompt x and greedy do not go together.");
  assert.equal((await change("greedy", false)).prompt, undefined);
});

test("a change of dataset takes Python's adjustment, unless the learner changed that setting meanwhile", async () => {
  const { store } = await started({ delay: 5 });
  store.edit("dataset", "tasks", { commit: true });
  await store.settled();
  assert.equal(store.state.raw.tokenizer, "bpe");

  store.apply({ dataset: "names", tokenizer: "chars" });
  await store.settled();
  store.edit("dataset", "tasks", { commit: true });
  store.edit("tokenizer", "chars", { commit: true }); // while Python is still answering
  await store.settled();
  assert.equal(store.state.raw.tokenizer, "chars");
});

test("apply without a tokenizer lets Python fit the dataset; locked settings stay", async () => {
  const { store } = await started();
  await store.apply({ dataset: "tasks" });
  assert.equal(store.state.raw.tokenizer, "bpe");
  store.lock({ tokenizer: "chars", temperature: 2 }, null);
  await store.apply({ dataset: "tasks", temperature: 0.5 });
  assert.equal(store.state.raw.tokenizer, "chars");
  assert.equal(store.state.raw.temperature, "2");
  assert.ok(store.isLocked("tokenizer") && !store.isLocked("prompt"));
});

test("collect shows every error at once; settings of hidden controls go under the form", async () => {
  const { store, changes } = await started();
  store.lock({ min_new_tokens: 99 }, null);
  await store.apply({ temperature: "hot" });
  const out = await store.collect({ focus: true });
  assert.deepEqual(Object.keys(out.errors).sort(), ["min_new_tokens", "temperature"]);
  assert.ok(store.state.errors.temperature);
  assert.equal(store.state.errors.min_new_tokens, undefined); // its control is not on the screen
  assert.match(store.state.formError, /Min new tokens/);
  assert.equal(changes.at(-1).type, "checked");
  assert.equal(changes.at(-1).focus, true);
  await store.apply({ temperature: "0.5", min_new_tokens: 0 }, { locks: false });
  store.lock(null, null);
  const good = await store.collect();
  assert.equal(good.settings.temperature, "0.5");
});

test("a run's refusal stands against a check of older settings still on its way", async () => {
  const { store } = await started({ delay: 10 });
  store.edit("temperature", "0.9", { commit: true }); // a check on its way
  store.showErrors([{ field: "temperature", message: "Temperature must be a number; got nothing." }]);
  await store.settled();
  assert.match(store.state.errors.temperature, /got nothing/);
});

test("the run's steps, the characters each shows, the selection that follows them", async () => {
  const { store, changes } = await started();
  const run = { id: 1, steps: [], shown: [], held: [], selected: null, follow: true, done: false };
  store.runStarted(run);
  store.runSteps(run, { steps: [{ step: 0 }, { step: 1 }], flow: [[0, "a"], [1, "bc"]], held: [[1, "d"]] });
  assert.deepEqual(run.shown, [1, 2]);
  assert.equal(run.selected, 1);
  assert.deepEqual(run.held, [[1, "d"]]);
  store.select(0);
  assert.equal(run.selected, 0);
  assert.equal(run.follow, false);
  store.select(5); // no such step: nothing happens
  assert.equal(run.selected, 0);
  store.runSteps(run, { steps: [{ step: 2 }], flow: [[2, "é"], [1, null]], held: [] });
  assert.equal(run.selected, 0); // picked by the learner: it stays
  assert.deepEqual(run.shown, [1, 2, 1]);
  store.runEnded(run, { status: "done" });
  assert.equal(run.done, true);
  assert.deepEqual(changes.slice(-5).map((c) => c.type), ["run-start", "steps", "select", "steps", "run-end"]);
  // a batch of a run that is no longer on screen changes nothing
  const other = { id: 2, steps: [], shown: [], held: [], follow: true };
  store.runSteps(other, { steps: [{ step: 0 }], flow: [[0, "x"]], held: [] });
  assert.equal(other.steps.length, 0);
});

test("the live check's verdicts arrive behind the steps and fill them in", async () => {
  const { store, changes } = await started();
  const run = { id: 1, steps: [], shown: [], held: [], selected: null, follow: true, done: false };
  store.runStarted(run);
  const pending = (step) => ({ step, cache_diff: null, cache_ok: null });
  store.runSteps(run, { steps: [pending(0), pending(1), pending(2)], flow: [], held: [] });
  assert.equal(run.steps[1].cache_ok, null);
  // a batch with no new step, only verdicts (the text had ended): still announced
  store.runSteps(run, { steps: [], flow: [], held: [], checks: [[0, 1e-15, true], [1, 2e-15, true], [2, 0.5, false]] });
  assert.deepEqual(run.steps.map((s) => s.cache_ok), [true, true, false]);
  assert.equal(run.steps[2].cache_diff, 0.5);
  assert.equal(changes.at(-1).type, "steps");
  // a verdict for a step the page does not hold changes nothing
  store.runSteps(run, { steps: [], flow: [], held: [], checks: [[9, 0, true]] });
  assert.equal(run.steps.length, 3);
});

test("a long prompt's reading and the check after the text: the text's own time is kept", async () => {
  const { store } = await started();
  const run = { id: 1, steps: [], shown: [], held: [], selected: null, follow: true, done: false, startedAt: performance.now() - 50 };
  store.runStarted(run);
  // batches that read the prompt a chunk at a time: no step, how far the reading is
  store.runSteps(run, { steps: [], flow: [], held: [], reading: { done: 16, total: 40 } });
  assert.deepEqual(run.reading, { done: 16, total: 40 });
  assert.equal(run.textElapsed, undefined);
  store.runSteps(run, { steps: [{ step: 0 }], flow: [[0, "a"]], held: [] });
  assert.equal(run.reading, null);
  // the batch that ends the text: its time is the text's, whatever the check takes after it
  store.runSteps(run, { steps: [{ step: 1 }], flow: [[1, "b"]], held: [], checking: true, text: "ab" });
  const textElapsed = run.textElapsed;
  assert.ok(textElapsed >= 50);
  store.runSteps(run, { steps: [], flow: [], held: [], checking: true, text: "ab", checks: [[0, 0, true]] });
  assert.equal(run.textElapsed, textElapsed); // a later batch of the check does not move it
  assert.equal(run.text, "ab");
});

test("More rules counts the settings that are not at their defaults", async () => {
  const { store } = await started();
  assert.equal(store.changed(["temperature", "greedy", "stop"]), 0);
  store.edit("temperature", "1.0"); // the same number
  store.edit("greedy", true, { commit: true });
  store.edit("stop", "ab\ncd", { commit: true });
  assert.equal(store.changed(["temperature", "greedy", "stop"]), 2);
  await store.settled();
});

test("another model chosen: its run leaves the screen; the real model waiting for its load is no error until a run is asked for", async () => {
  const info = { ...INFO, fields: [...FIELDS, { name: "model", kind: "choice" }], defaults: { ...INFO.defaults, model: "bigram" } };
  const waiting = { field: "model", label: "Model", message: "Model: SmolLM2 is not loaded in this page yet.", pending: "load" };
  const py = python({ more: (s) => (s.model === "smollm2" ? [waiting] : []) });
  const store = createStore();
  store.connect(py.call);
  const changes = [];
  store.subscribe((change) => changes.push(change));
  await store.ready(info, [...NAMES, "model"]);
  const run = { id: 1, settings: { model: "bigram" }, steps: [], shown: {} };
  store.runStarted(run);
  store.edit("model", "smollm2", { commit: true });
  assert.equal(store.state.run, run); // a run under way is not dropped
  store.runEnded(run, {});
  store.edit("temperature", "0.5", { commit: true }); // another setting: the run stays
  assert.equal(store.state.run, run);
  store.edit("model", "bigram", { commit: true }); // its own model again: it stays
  assert.equal(store.state.run, run);
  changes.length = 0;
  store.edit("model", "smollm2", { commit: true });
  assert.equal(store.state.run, null);
  assert.deepEqual(changes.filter((c) => c.type === "run-cleared").map((c) => c.run), [run]);
  await store.settled();
  assert.equal(store.state.errors.model, undefined); // chosen: an invitation, not an error
  const asked = await store.collect(); // a run asked for: refused by name
  assert.deepEqual(asked.errors, { model: waiting.message });
  assert.equal(store.state.errors.model, waiting.message);
});

test("the real model read (again) is checked as no change of model: the learner's sampling stays", async () => {
  const { store, py } = await started();
  py.asked.length = 0;
  store.pretrainedLoaded({ name: "Real", engine: "reference" }, { from: "kept", kept: true });
  await new Promise((resolve) => setTimeout(resolve, 5));
  // Python's check of the settings, with no field named as changed: a change of model would
  // move the sampling still at the workbench's defaults to the model card's
  assert.equal(py.asked.length, 1);
  assert.equal(py.asked[0].endpoint, "check");
  assert.equal(py.asked[0].request.changed, null);
});
