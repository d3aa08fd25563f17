// The serving chapter's drawing rules (web/serving/pool.js, serving.js): a scheduler step in
// words, who holds each block, the memory bar's parts, the grid's words for a screen reader,
// the prefix tree's token text, and the run's summary from Python's numbers. No document needed.

import assert from "node:assert/strict";
import { test } from "node:test";

import { barLabel, gridLabel, holders, memoryParts, pieceText, stepWords } from "../../web/serving/pool.js";
import { servingStats, servingSummary } from "../../web/serving/serving.js";
import { doneStatus, perSecond, runningStatus } from "../../web/lesson/planned.js";

// blocks of 4; request 0 left at this step, 2 joined finding 8 positions in the tree, 3 joined
// as a fork of 2's prompt, 1 came back after a preemption, 4 was preempted
const FRAME = {
  step: 7, joined: [1, 2, 3], left: [0], preempted: [4], recomputed: [1], running: [1, 2, 3],
  waiting: [4, 5], reused: [[2, 8]], forked: [3], copied: [[5, 9]], evicted: [6],
  tables: [[0, 6, [0, 1]], [1, 5, [2, 7]], [2, 9, [3, 4, 5]], [3, 9, [3, 4, 9]]],
  state: "CFUSSUFTFU", refs: [1, 0, 1, 2, 2, 1, 0, 2, 0, 1],
  memory: { used: 23, reserved: 5, cached: 4, free: 8 },
};
const LABELS = { 0: "0", 1: "1", 2: "2a", 3: "2b", 4: "3", 5: "4" };

test("a step's decisions, each named once, with what the tree and the fork saved", () => {
  const words = stepWords(FRAME, LABELS, 4);
  assert.match(words, /^Step 7\. /);
  assert.match(words, /Requests 2a \(8 positions of its prompt found in the prefix tree, 2 blocks not computed again\) and 2b \(its prompt’s blocks shared with its first sample\) joined\./);
  assert.match(words, /Request 1 came back after a preemption: its window was computed again in one pass\./);
  assert.match(words, /so request 3 \(the youngest\) was preempted/);
  assert.match(words, /Copied on write: block 5 → 9/);
  assert.match(words, /gave back block 6/);
  assert.match(words, /Request 0 finished and left/);
  assert.match(words, /4 requests decoded a token; 2 requests wait\.$/);
  // request 1 joined as a recomputation, not as a new request
  assert.doesNotMatch(words, /Requests 1/);
});

test("a quiet step says only who decoded", () => {
  const quiet = { ...FRAME, joined: [], left: [], preempted: [], recomputed: [], reused: [], forked: [], copied: [], evicted: [], waiting: [] };
  assert.equal(stepWords(quiet, LABELS, 4), "Step 7. 4 requests decoded a token.");
});

test("holders: the running requests' tables after the step; a leaver holds nothing", () => {
  const h = holders(FRAME, LABELS);
  assert.deepEqual(h[3], ["2a", "2b"]);
  assert.deepEqual(h[9], ["2b"]);
  assert.equal(h[0], undefined); // request 0 left: its full block is the tree's now
  assert.deepEqual(h[7], ["1"]);
});

test("the memory bar's parts are Python's numbers, in order, and add up in its label", () => {
  const parts = memoryParts(FRAME);
  assert.deepEqual(parts.map(([k, n]) => [k, n]), [["used", 23], ["reserved", 5], ["cached", 4], ["free", 8]]);
  assert.match(barLabel(FRAME), /^Memory at step 7, 40 positions: 23 keys and values/);
});

test("the grid's words count every block by its state", () => {
  assert.equal(gridLabel(FRAME), "The block pool at step 7: 10 blocks; 3 held by one request, 1 held by one request and kept by the prefix tree, 2 shared by requests, 1 kept by the prefix tree only, 3 free.");
});

test("tree text: the start token, spaces and newlines visible", () => {
  assert.equal([null, "T", "h", " ", "\n"].map(pieceText).join(""), "⟨s⟩Th·⏎");
});

const RESULT = {
  runs: 8, parallel_samples: 2, memory_blocks: 64, block_size: 16, max_running: 8, steps: 40,
  static_steps: 55, window: 128, own_workload: false, prefix_hit_rate: 0.25, prefill_tokens_saved: 96,
  copies_on_write: 3, preemptions: 0, evicted: 0, blocks_shared: 12,
  waste: { contiguous_max: 0.6, contiguous_actual: 0.2, paged: 0.05 },
};

test("the summary carries Python's numbers and leaves out what did not happen", () => {
  const s = servingSummary(RESULT);
  assert.match(s, /^The seeded workload: 8 requests \(4 prompts × 2 samples\) served from 64 blocks of 16 positions/);
  assert.match(s, /in 40 steps; static batching.*took 55\./);
  assert.match(s, /\(128 positions\).*60\.0%.*20\.0%.*paged, 5\.0%/);
  assert.match(s, /found 25\.0% of the prompts’ tokens: 96 positions were not computed again; 3 blocks were copied on write\.$/);
  assert.doesNotMatch(s, /preempt|evicted/);
  const stats = Object.fromEntries(servingStats(RESULT));
  assert.equal(stats["Steps, static"], "55");
  assert.equal(stats["Waste, paged"], "5.0%");
});

test("the run's status counts what Python counts, and its rate keeps two digits", () => {
  const note = "each request served twice: continuously batched, then in static batches";
  assert.equal(runningStatus(7, 12, 500, "serving", "servings", note), `Running: 7 of 12 servings (${note})…`);
  assert.equal(doneStatus({ runs: 6, steps: 1234 }, 40.3, ["request", "requests"], undefined, note),
    `Done: 6 requests (${note}), 1,234 steps, in 40.3 s (0.15 requests per second).`);
  assert.equal(doneStatus({ runs: 16, steps: 1 }, 8, ["request", "requests"]), "Done: 16 requests, 1 step, in 8.0 s (2 requests per second).");
  assert.equal(doneStatus({ runs: 1, steps: 30 }, 1, ["run", "runs"]), "Done: 1 run, 30 steps, in 1.0 s (1 run per second).");
  assert.equal(doneStatus({ runs: 40, steps: 900 }, 2, ["run", "runs"], ["answer", "answers"]), "Done: 40 runs, 900 steps, in 2.0 s (20 answers per second).");
  assert.equal(perSecond(6, 40.3), "0.15");
  assert.equal(perSecond(37, 10), "3.7");
  assert.equal(perSecond(1234, 10), "123");
  assert.equal(perSecond(3, 1000), "0.003");
});
