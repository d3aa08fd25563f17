// The search chapter's drawing rules (web/search/tree.js, beam.js, speculative.js): the beam
// tree laid out from Python's tree (each line starts at the beam it grew from), what happened to
// a step's candidates, the cache rows copied, and the words of a round. No document needed.

import assert from "node:assert/strict";
import { test } from "node:test";

import { COL, NODE_H, NODE_W, ROW, fate, layout, short } from "../../web/search/tree.js";
import { beamSummary, logps, rowsSentence } from "../../web/search/beam.js";
import { BEAM_COLUMNS, searchCsv } from "../../web/search/exports.js";
import { cacheWords, guessWords, howWords } from "../../web/search/speculative.js";
import { createPlayer } from "../../web/search/play.js";

// two beams over two steps; "b" was pruned, "d" finished at step 1 and was returned second
const TREE = {
  nodes: [
    [{ parent: null, token_text: "a", score: -0.5, rank: 1 }, { parent: null, token_text: "b", score: -1.2, rank: null }],
    [{ parent: 0, token_text: "c", score: -1.0, rank: 1 }, { parent: 1, token_text: "x", score: -1e9, rank: null, blocked: true }],
  ],
  finished: [{ step: 1, parent: 0, token_text: "d", score: -1.4, rank: 2, banked: true, left: null },
    { step: 1, parent: 1, token_text: "e", score: -2.0, rank: null, banked: true, left: 2 }],
  rows_from: [[0, 0], [0, 1]],
};

test("every line starts at the right edge of the beam it grew from", () => {
  const L = layout(TREE, 1);
  const at = (step, slot) => L.nodes.find((n) => n.step === step && n.slot === slot);
  const c = at(1, 0);
  const toC = L.edges.find((e) => e.x2 === c.x && e.y2 === c.y + NODE_H / 2);
  assert.equal(toC.x1, at(0, 0).x + NODE_W);
  assert.equal(toC.y1, at(0, 0).y + NODE_H / 2);
  assert.equal(c.x - at(0, 0).x, COL);
  assert.equal(at(0, 1).y - at(0, 0).y, ROW);
  // a slot filled in after its beam finished is not drawn
  assert.equal(at(1, 1), undefined);
  // finished paths sit below both beams, in the column of their step, from their parent
  const finished = L.nodes.filter((n) => n.finished);
  assert.equal(finished.length, 2);
  for (const f of finished) assert.ok(f.y > at(0, 1).y && f.x === c.x);
  const eLine = L.edges.find((e) => e.finished && e.y2 === finished[1].y + NODE_H / 2);
  assert.equal(eLine.y1, at(0, 1).y + NODE_H / 2);
});

test("a finished path is ticked while the bank holds it, not after it is let go", () => {
  // "e" is let go at step 2: a third step is drawn from the second's beams
  const longer = { ...TREE, nodes: [...TREE.nodes, TREE.nodes[1]] };
  const held = (tree, upto) => Object.fromEntries(layout(tree, upto).nodes.filter((n) => n.finished).map((n) => [n.text, n.held]));
  assert.deepEqual(held(longer, 1), { d: true, e: true });
  assert.deepEqual(held(longer, 2), { d: true, e: false });
});

test("returned paths are strong, the best strongest, the rest faded", () => {
  const kinds = Object.fromEntries(layout(TREE, 1).nodes.map((n) => [n.text, n.kind]));
  assert.deepEqual(kinds, { a: "best", b: "pruned", c: "best", d: "returned", e: "pruned" });
});

test("the tree grows with the step shown", () => {
  const first = layout(TREE, 0);
  assert.deepEqual(first.nodes.map((n) => n.text), ["a", "b"]);
  assert.ok(first.width < layout(TREE, 1).width);
});

test("a long token is cut in its box and kept whole elsewhere", () => {
  assert.equal(short("document"), "docum…");
  assert.equal(short("the"), "the");
});

test("what happened to each candidate of a step", () => {
  const step = {
    kept: [{ from: 0, token_id: 3, score: -1 }, { from: 1, token_id: 4, score: -2 }],
    candidates: [
      { beam: 0, token_id: 3, score: -1, finished: false, entered: false, banked: false },
      { beam: 0, token_id: 0, score: -1.5, finished: true, entered: true, banked: true },
      { beam: 1, token_id: 4, score: -2, finished: false, entered: false, banked: false },
      { beam: 1, token_id: 0, score: -2.5, finished: true, entered: false, banked: false },
      { beam: 1, token_id: 7, score: -3, finished: false, entered: false, banked: false },
      { beam: 0, token_id: 9, score: -3.5, finished: true, entered: true, banked: false },
    ],
  };
  assert.deepEqual(step.candidates.map((c) => fate(c, step)),
    ["kept as beam 0", "finished: into the bank", "kept as beam 1", "finished, but not among the best: dropped", "pruned",
      "finished, but the bank held better ones: dropped"]);
});

test("the cache rows copied after a step, with the rows shared and dropped", () => {
  const words = rowsSentence([0, 0, 1, 3], 2);
  assert.match(words, /0 ← 0, 1 ← 0, 2 ← 1, 3 ← 3\./);
  assert.match(words, /Row 0 is copied into more than one row/);
  assert.match(words, /Row 2’s beam was pruned/);
  assert.doesNotMatch(rowsSentence([0, 1], 0), /copied into more|pruned/);
});

test("greedy rounds draw nothing: the token after a turned-down guess is the model's own", () => {
  assert.equal(howWords("resampled", false), "drawn from max(0, p − q)");
  assert.doesNotMatch(howWords("resampled", true), /drawn|max\(0/);
  assert.equal(howWords("bonus", true), howWords("bonus", false));
});

test("a round's guesses and cache in words", () => {
  assert.equal(guessWords({ p: 0.38, q: 0.35, u: 0.4331, ratio: 1.0862, accepted: true }, false),
    "p 38.0% / q 35.0% = 1.09; u 0.433 < 1.09: kept");
  assert.match(guessWords({ p: 0.008, q: 0.216, u: 0.16, ratio: 0.038, accepted: false }, false), /u 0.160 ≥ 0.04: turned down/);
  assert.equal(cacheWords([12, 17, 15]), "Cache: 12 positions, 17 while the model checks, 15 kept (2 taken back).");
  assert.equal(cacheWords([1, 5, 5]), "Cache: 1 position, 5 while the model checks, 5 kept.");
});

test("the CSV of a beam search: one row per candidate per step, with what happened to it", () => {
  const trace = { strategy: "beam", steps: [{ step: 0, kept: [{ from: 0, token_id: 3, score: -1 }], candidates: [
    { beam: 0, token_id: 3, token_text: "a", score: -1, finished: false, entered: false },
    { beam: 0, token_id: 5, token_text: "b,c", score: -2, finished: false, entered: false }] }] };
  const lines = searchCsv(trace).trimEnd().split("\r\n");
  assert.equal(lines[0], BEAM_COLUMNS.join(","));
  assert.deepEqual(lines.slice(1), ["0,0,3,a,-1,false,kept as beam 0", '0,0,5,"b,c",-2,false,pruned']);
});

test("the CSV of a speculative run: every guess, then the token that ended the round", () => {
  const trace = { strategy: "speculative", rounds: [{ tokens: [{ token_id: 1, token_text: "x", p: 0.5, q: 0.25, u: 0.1, ratio: 2, accepted: true }, { token_id: 2, token_text: "y", p: 0.1, q: 0.4, u: 0.9, ratio: 0.25, accepted: false }], resampled: 4 }],
    steps: [{ round: 0, source: "accepted", token_id: 1, token_text: "x" }, { round: 0, source: "resampled", token_id: 4, token_text: "z" }] };
  const lines = searchCsv(trace).trimEnd().split("\r\n");
  assert.deepEqual(lines.slice(1), ["0,0,1,x,0.5,0.25,2,0.1,true,draft", "0,1,2,y,0.1,0.4,0.25,0.9,false,draft", "0,2,4,z,,,,,true,resampled"]);
});

test("Play moves the step from the start to the end, and a second press or the range stops it; the range draws where it is put", (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const listeners = {};
  const fake = (props) => ({ ...props, setAttribute(k, v) { this[k] = v; }, addEventListener(type, fn) { listeners[`${props.id}:${type}`] = fn; } });
  const range = fake({ id: "range", value: "3", max: "3" });
  const button = fake({ id: "button", textContent: "Play", disabled: true });
  const drawn = [];
  const player = createPlayer(range, button, (k) => drawn.push(k), 100);
  player.reset();
  assert.equal(button.disabled, false);
  listeners["button:click"](); // at the end: starts again from 0
  assert.equal(button.textContent, "Pause");
  const ticks = (n) => { for (let i = 0; i < n; i += 1) t.mock.timers.tick(100); };
  ticks(3);
  assert.deepEqual(drawn, [0, 1, 2, 3]);
  ticks(1); // past the end: it stops by itself
  assert.equal(button.textContent, "Play");
  range.value = "0";
  listeners["button:click"]();
  ticks(1);
  range.value = "2";
  listeners["range:input"](); // the learner takes the range
  ticks(5);
  assert.deepEqual(drawn, [0, 1, 2, 3, 1, 2]);
  assert.equal(button["aria-pressed"], "false");
});

// a reply as Python's beam endpoint gives it, with only what the summary reads
const beamReply = (scores, why) => ({
  side: ["beam", "greedy", "sampled"].map((name, i) => ({ name, logprob_per_token: scores[i] })),
  trace: { steps: [{}, {}, {}], stopped: "every beam finished" },
  why: { likelier: true, better: [], same: [], found: [], barred: [], causes: [], no_repeat_ngram_size: 0, length_penalty: 1, num_beams: 2, ...why },
});

test("a beam that is greedy's own text is said to be found, not compared with itself", () => {
  // float32 sums in two orders: the same tokens, last digits apart
  const words = beamSummary(beamReply([-0.6312, -0.6318, -1.2], { same: ["greedy"], found: ["greedy"] }));
  assert.match(words, /The search found greedy decoding’s text itself: the best beam is the same tokens \(−0\.63 per token\), and no path it kept was likelier\. The sample scores −1\.20\./);
  assert.doesNotMatch(words, /likelier per token \(/);
  // the sample is greedy too (the workbench's rules draw nothing): both found
  assert.match(beamSummary(beamReply([-0.5, -0.5, -0.5], { same: ["greedy", "sampled"], found: ["greedy", "sampled"] })),
    /found greedy decoding’s text and the sample itself: the best beam is the same tokens \(−0\.50 per token\), and no path it kept was likelier\. Likely/);
  // found, yet the sample likelier: the scores name greedy's text as the beam's own
  assert.match(beamSummary(beamReply([-0.8347, -0.8347, -0.8238], { likelier: false, same: ["greedy"], found: ["greedy"], better: ["sampled"], causes: ["narrow"] })),
    /Here the best beam scores −0\.83 per token \(greedy decoding’s text: the same tokens\), the sample −0\.82: the search keeps only 2 paths/);
});

test("scores that differ are written with the digits that tell them apart", () => {
  assert.deepEqual(logps([-0.7185, -0.7197, -1.2]), ["−0.719", "−0.720", "−1.200"]);
  assert.deepEqual(logps([-0.5, -0.5, -1]), ["−0.50", "−0.50", "−1.00"]); // equal: two decimals
  const words = beamSummary(beamReply([-0.7185, -0.7197, -1.2354], {}));
  assert.match(words, /likelier per token \(−0\.719\) than greedy decoding’s text \(−0\.720\)/);
});

test("a search that ended without results says why: Stop, a lost worker, or Python's errors", async () => {
  const { failedSentence } = await import("../../web/search/ask.js");
  const STOPPED = "Stopped before it finished: nothing of it was kept.";
  assert.equal(failedSentence({ ok: false, stopped: true, errors: [{ field: "request", message: STOPPED }] }, []), STOPPED);
  const lost = failedSentence({ ok: false, lost: "The Python worker crashed." }, []);
  assert.equal(lost, "The Python worker crashed. The search went with it and nothing of it was kept; once Python is back, search again.");
  assert.doesNotMatch(lost, /field/);
  const beams = { field: "num_beams", message: "Beams must be a whole number from 1 to 8; got 0." };
  assert.equal(failedSentence({ ok: false, errors: [beams] }, ["num_beams"]), "Fix the field marked above.");
  const other = { field: "model", message: "Beam search runs the transformer or SmolLM2." };
  assert.equal(failedSentence({ ok: false, errors: [beams, other] }, ["num_beams"]), other.message);
});
