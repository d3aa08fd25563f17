// What the real model's card and the cache card say of a run, from Python's numbers: a chat
// turn's reading of its prompt (from the cache, or over the window), what a file of one's own
// must be, the loaded model's shape, and the live check's limit for the model that ran.

import assert from "node:assert/strict";
import { test } from "node:test";

import { runTolerance } from "../../web/kv/cache.js";
import { shapeOf } from "../../web/kv/costs.js";
import { droppingWords, facts, ownFile, turnWords } from "../../web/pretrained/pretrained.js";

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
  const words = ownFile({ max_file_bytes: 256 * 2 ** 20, architectures: ["llama"], types: ["F32", "F16", "Q4_0", "Q4_1", "Q8_0"] });
  assert.match(words, /^A model of llama’s architecture/);
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
