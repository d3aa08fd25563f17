// What the real model's card and the cache card say of a run, from Python's numbers: a chat
// turn's reading of its prompt (from the cache, or over the window), what a file of one's own
// must be, the loaded model's shape, and the live check's limit for the model that ran.

import assert from "node:assert/strict";
import { test } from "node:test";

import { runTolerance } from "../../web/kv/cache.js";
import { shapeOf } from "../../web/kv/costs.js";
import { facts } from "../../web/pretrained/card.js";
import { droppingWords, turnWords } from "../../web/pretrained/chat.js";
import { loadedWords } from "../../web/pretrained/load.js";
import { ownFile } from "../../web/pretrained/ownfile.js";
import { createStore } from "../../web/state/store.js";
import { modelOf, realModel } from "../../web/state/settings.js";

test("a chat turn says what it read of its prompt", () => {
  assert.equal(turnWords({ prompt_tokens: 59, reused: 0, dropped: 0, window: 2048 }),
    "This turn read its whole prompt, 59 tokens.");
  assert.equal(turnWords({ prompt_tokens: 59, reused: 44, dropped: 0, window: 2048 }),
    "This turn read 15 new tokens of its prompt’s 59: the other 44 were in the cache of the turn before.");
  // 2,100 tokens in a window of 2,048: the shift drops whole halves (1,024) from the start
  const over = turnWords({ prompt_tokens: 2100, reused: 0, dropped: 1024, window: 2048 });
  assert.match(over, /^The conversation is 2,100 tokens, more than the 2,048 positions the model keeps: its oldest 1,024 tokens/);
  assert.match(over, /answered from the last 1,076 alone\./);
});

test("a turn over the window says what it drops before the model reads it", () => {
  const said = droppingWords({ prompt_tokens: 2100, reused: 0, dropped: 1024, window: 2048 });
  assert.match(said, /^The conversation is 2,100 tokens, more than the 2,048 positions the model keeps: its oldest 1,024 tokens/);
  assert.match(said, /the model reads the last 1,076, a part at a time \(Stop ends it there\)\.$/);
});

test("a file of one's own: the reader's limits in words", () => {
  const words = ownFile({ max_file_bytes: 256 * 2 ** 20, architectures: ["llama"], types: ["F32", "F16", "Q4_0", "Q4_1", "Q8_0"] }, "Smol");
  assert.match(words, /^A model of llama’s architecture \(as Smol is: the file says so\)/);
  assert.match(words, /runs and chats with Model Smol then use it/);
  assert.match(words, /stored as F32, F16, Q4_0, Q4_1 or Q8_0, a file of up to 256 MiB\./);
});

test("the loaded model's shape, and its KV cache per token", () => {
  const info = { name: "Smol", params: 134_515_008, n_layer: 30, n_head: 9, n_kv_head: 3, head_dim: 64, vocab_size: 49152, context_size: 2048, trained_context: 8192, bytes_per_token: 46080 };
  assert.equal(facts(info), "Smol: 135 million parameters · 30 layers · 9 query heads sharing 3 key-value heads of 64 · 49,152 tokens · 2,048 positions kept (trained on 8,192) · its KV cache takes 45 KiB a token (float32).");
  assert.deepEqual(shapeOf({ bytes_per_token: 46080, context_size: 2048 }),
    { bytes_per_token: 46080, context_size: 2048, perToken: 46080, allocated: 94_371_840 });
});

test("the live check is judged by the limit of the model that ran", () => {
  const info = { cache_tolerance: 1e-9 };
  assert.equal(runTolerance({ cache: { tolerance: 1e-3 } }, info), 1e-3);
  assert.equal(runTolerance({ settings: {} }, info), 1e-9); // a run from before the reply said it
  assert.equal(runTolerance(null, info), 1e-9);
});

// setup's models, as Python's catalog sends them: the real model is the one read from a file
const INFO = {
  models: [
    { id: "bigram", label: "Bigram (counts)", about: "Counts.", pretrained: false },
    { id: "real", label: "Real (94 MiB)", about: "Real.", pretrained: true, name: "Real", title: "Real-1B" },
  ],
};

test("which model is the real one, and its name, are Python's", () => {
  assert.equal(realModel(INFO).id, "real");
  assert.equal(realModel(INFO).name, "Real");
  assert.equal(modelOf(INFO, "bigram").about, "Counts.");
  assert.equal(modelOf(INFO, "nope"), null);
  assert.equal(realModel({ models: [INFO.models[0]] }), null);
  assert.equal(realModel(null), null);
});

test("a load that ended says where the model came from and what is kept", () => {
  const ms = { total: 4200, download: 2000, check: 300, read: 1900 };
  assert.equal(loadedWords({ from: "site", kept: true, bytes: 98_362_432, ms }),
    "Loaded in 4.2 s: downloaded 93.8 MiB in 2.0 s, checked in 0.3 s, read in 1.9 s. Kept in this browser, so the next visit needs no download. Press Generate to run it.");
  assert.match(loadedWords({ from: "site", kept: false, bytes: 1, ms }), /This browser would not keep it, so the next visit downloads it again\./);
  assert.equal(loadedWords({ from: "kept", kept: true, ms }), "Loaded from the copy kept in this browser (checked) in 4.2 s. Press Generate to run it.");
  assert.equal(loadedWords({ from: "disk", bytes: 2 ** 20, info: { name: "Mine" }, ms }, { file: "m.gguf" }),
    "Loaded Mine from your file m.gguf (1 MiB) in 4.2 s. It is not kept in this browser. Press Generate to run it.");
  assert.match(loadedWords({ from: "kept", ms }, { again: true }), /^Python was restarted, so the model was read again from the copy kept in this browser in 4\.2 s/);
});

test("the real model's load is the store's: begun, said, loaded, kept, gone with its worker", () => {
  const store = createStore();
  const heard = [];
  store.subscribe((change) => heard.push(change.type));
  assert.deepEqual(store.state.pretrained, { loaded: false, info: null, loading: null, said: { text: "", failed: false }, bar: null, from: null, kept: false, engine: null });
  store.pretrainedLoading({ id: 7, again: false, file: null });
  store.pretrainedSaid({ text: "Downloading", failed: false }, 0.5);
  assert.equal(store.state.pretrained.loading.id, 7);
  assert.equal(store.state.pretrained.bar, 0.5);
  store.pretrainedSaid({ text: "Checking", failed: false }); // the bar stays where it was
  assert.equal(store.state.pretrained.bar, 0.5);
  store.pretrainedLoading(null);
  store.pretrainedLoaded({ name: "Real" }, { from: "site", kept: true });
  assert.deepEqual([store.state.pretrained.loaded, store.state.pretrained.from, store.state.pretrained.kept], [true, "site", true]);
  store.pretrainedKept(false);
  assert.equal(store.state.pretrained.kept, false);
  // the worker went: the model with it, and where it came from is remembered to read it back
  store.pretrainedLoaded(null);
  assert.deepEqual([store.state.pretrained.loaded, store.state.pretrained.info, store.state.pretrained.from], [false, null, "site"]);
  // the engine chosen is the store's too, and stays through the worker's loss (it is read
  // back for the same engine)
  store.pretrainedEngine("reference");
  assert.equal(store.state.pretrained.engine, "reference");
  assert.deepEqual(heard, Array(8).fill("pretrained"));
});

test("Python's default engine is the one chosen until the learner chooses another", async () => {
  const store = createStore();
  const engines = { choices: [{ id: "reference" }, { id: "quantized" }], default: "quantized" };
  await store.ready({ fields: [], defaults: {}, pretrained: { loaded: false, engines } }, []);
  assert.equal(store.state.pretrained.engine, "quantized");
  // a widget joining a Python that holds the model: the engine it was read for
  await store.ready({ fields: [], defaults: {}, pretrained: { loaded: true, engine: "reference", engines } }, []);
  assert.deepEqual([store.state.pretrained.loaded, store.state.pretrained.engine], [true, "reference"]);
});
