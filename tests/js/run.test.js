// A run of the workbench (web/state/run.js) with a stand-in for the worker: the page's state as
// Generate, Python's check, the run's messages and Stop move it. What is tested is the run's own
// bookkeeping: the page leaves "ready" the moment Generate is pressed (tests and course pages
// wait on <html data-state>), refused settings bring it back with the errors, a Stop pressed
// while the settings are still being checked means no run, and the batches land in the store.

import assert from "node:assert/strict";
import { test } from "node:test";

import * as replies from "../../web/runtime/replies.js";
import { createRuns } from "../../web/state/run.js";
import { createStore } from "../../web/state/store.js";

const FIELDS = [
  { name: "prompt", kind: "text" },
  { name: "temperature", kind: "float" },
];
const INFO = { fields: FIELDS, defaults: { prompt: "", temperature: 1 }, datasets: {} };

// The worker: "check" answers after a tick (a temperature above 100 is refused); a posted
// "generate" is kept so the test decides what the worker says next.
function fakeClient() {
  const handlers = new Map();
  const posted = [];
  let id = 0;
  const check = ({ settings }) => {
    const bad = Number(settings.temperature) > 100;
    const errors = bad ? [{ field: "temperature", label: "Temperature", message: "Temperature must be a number from 0 to 100." }] : [];
    return { ok: true, errors, values: bad ? { prompt: settings.prompt } : { ...settings }, adjust: {}, not_used: {}, applies: {} };
  };
  return {
    posted,
    id: () => ++id,
    post: (m) => posted.push(m),
    on: (type, fn) => handlers.set(type, fn),
    listen: () => {},
    call: (endpoint, request) => new Promise((resolve) => setTimeout(() => resolve(check(request)), 1)),
    say: (m) => handlers.get(m.type)(m),
  };
}

async function page() {
  const store = createStore();
  const client = fakeClient();
  store.connect(client.call);
  const runs = createRuns(store, client);
  await store.ready(INFO, ["prompt", "temperature"]);
  store.setPhase("ready");
  const phases = [];
  store.subscribe((change, state) => { if (change.type === "phase") phases.push(state.phase); });
  return { store, client, runs, phases };
}

test("Generate leaves ready at once, before Python has checked anything", async () => {
  const { store, client, runs } = await page();
  const result = runs.generate();
  assert.equal(store.state.phase, "generating");
  assert.equal(client.posted.length, 0); // still checking
  while (!client.posted.length) await new Promise((r) => setTimeout(r, 1));
  const { id } = client.posted[0];
  assert.equal(client.posted[0].type, "generate");
  client.say({ type: "started", id, settings: client.posted[0].settings, greedy: false });
  client.say({ type: "steps", id, steps: [{ token_text: "a" }], flow: [[0, "a"]], held: [] });
  client.say({ type: "done", id, finish_reason: "stop", stop_reason: "eos", text: "a" });
  const r = await result;
  assert.equal(r.status, "done");
  assert.equal(r.text, "a");
  assert.equal(store.state.phase, "ready");
  assert.equal(store.state.run.steps.length, 1);
  assert.equal(store.state.run.shown[0], 1);
});

test("refused settings bring the page back to ready with the error next to its field", async () => {
  const { store, client, runs, phases } = await page();
  store.edit("temperature", "500");
  const r = await runs.generate();
  assert.equal(r.status, "invalid");
  assert.deepEqual(r.errors.map((e) => e.field), ["temperature"]);
  assert.deepEqual(phases, ["generating", "ready"]);
  assert.equal(client.posted.length, 0); // nothing was asked of the worker
  assert.match(store.state.errors.temperature, /from 0 to 100/);
});

test("Stop while the settings are checked: no run starts", async () => {
  const { store, client, runs } = await page();
  const result = runs.generate();
  assert.equal(runs.stop(), true);
  assert.equal((await result).status, "cancelled");
  assert.equal(client.posted.length, 0);
  assert.equal(store.state.phase, "ready");
});

test("a second Generate while one is on its way is busy, not a second run", async () => {
  const { client, runs } = await page();
  const first = runs.generate();
  assert.equal((await runs.generate()).status, "busy");
  while (!client.posted.length) await new Promise((r) => setTimeout(r, 1));
  assert.equal(client.posted.length, 1);
  const { id } = client.posted[0];
  client.say({ type: "started", id, settings: {}, greedy: false });
  client.say({ type: "done", id, finish_reason: "length", stop_reason: null, text: "" });
  assert.equal((await first).status, "done");
});

test("a field Python adds to a run's replies reaches the store as Python named it", async () => {
  const { store, client, runs } = await page();
  const result = runs.generate();
  while (!client.posted.length) await new Promise((r) => setTimeout(r, 1));
  const { id, settings } = client.posted[0];
  // the worker passes Python's replies on as replies.js makes them
  const start = { ok: true, settings, prompt_tokens: ["m", "a"], healed: null, greedy: false, vocab_size: 30, novel: { said: [1, 2] } };
  client.say(replies.started(id, start));
  const run = store.state.run;
  assert.deepEqual(run.novel, { said: [1, 2] });
  assert.deepEqual(run.prompt_tokens, ["m", "a"]);
  assert.equal(run.vocab_size, 30);
  assert.equal(run.type, undefined); // the message's own type is not Python's
  const step = { token_text: "a", extra: "kept" };
  const going = replies.batch(id, { ok: true, done: false, steps: [step], flow: [[0, "a"]], held: [], checks: [], text: "a" });
  assert.equal(going.type, "steps");
  client.say(going);
  assert.deepEqual(run.steps, [step]);
  const last = { ok: true, done: true, steps: [], flow: [], held: [], checks: [], text: "a", cut: [], json: null, finish_reason: "length", stop_reason: null, novel: "at the end" };
  const end = replies.batch(id, last);
  assert.equal(end.type, "done");
  client.say(end);
  const r = await result;
  assert.equal(r.novel, "at the end");
  assert.equal(run.finish.novel, "at the end");
  assert.deepEqual(Object.keys(run.finish).sort(), ["cut", "finish_reason", "json", "novel", "stop_reason", "text"]);
  assert.equal(r.text, "a");
  assert.equal(r.steps, 1);
});
