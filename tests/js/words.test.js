// How the page words numbers, tokens and endings (web/ui/render.js, web/ui/plot.js), and what it
// derives for display only (the draw strip's segments, the odds a step is told with). Pure
// functions: each checked against values worked out by hand.

import assert from "node:assert/strict";
import { test } from "node:test";

import { bytes, bytesOf } from "../../web/ui/bytes.js";
import { sci } from "../../web/ui/plot.js";
import { drawSegments, finishCode, finishSentence, pct, plural, readable, seconds, spoken, stepOdds, tokenName } from "../../web/ui/render.js";

test("a token as a learner reads it", () => {
  assert.equal(readable("a b"), "a␣b");
  assert.equal(readable("\n\t"), "⏎⇥");
  assert.equal(readable("<eos>"), "end");
  assert.equal(readable("\u0007"), "U+0007");
  assert.equal(spoken(" "), "“␣” (space)");
  assert.equal(spoken("<eos>"), "end-of-sequence");
  assert.equal(spoken("ma"), "“ma”");
});

test("a token in the text as a screen reader says it: blanks named, the word heard", () => {
  assert.equal(tokenName(" the"), "space, the");
  assert.equal(tokenName("\nThe"), "newline, The");
  assert.equal(tokenName("ma "), "ma, then space");
  assert.equal(tokenName(" "), "space");
  assert.equal(tokenName("\n\n"), "2 newlines");
  assert.equal(tokenName("  \t"), "2 spaces, tab");
  assert.equal(tokenName("ma"), null); // read as it is
  assert.equal(tokenName("a b"), null); // a blank inside is read as one
});

test("probabilities, counts and times", () => {
  assert.equal(pct(0.7310585786), "73.1%"); // softmax([2, 1])[0]
  assert.equal(pct(0), "0%");
  assert.equal(pct(1), "100%");
  assert.equal(pct(0.0004), "<0.1%");
  assert.equal(pct(0.99961), ">99.9%");
  assert.equal(pct(null), "–");
  assert.equal(plural(1, "step", "steps"), "1 step");
  assert.equal(plural(0, "step", "steps"), "0 steps");
  assert.equal(seconds(999), "999 ms");
  assert.equal(seconds(1250), "1.3 s");
});

test("small numbers and bytes, as the cache panels write them", () => {
  assert.equal(sci(0), "0");
  assert.equal(sci(0.031), "0.031");
  assert.equal(sci(4.4e-15), "4.4 × 10⁻¹⁵");
  assert.equal(sci(1e-9), "10⁻⁹");
  assert.equal(sci(9.96e-6), "10⁻⁵"); // 9.96 rounds to 10: one power up
  assert.equal(bytes(131072), "128 KiB"); // 32 layers x 8 KV heads x 128 x 2 bytes x K and V
  assert.equal(bytes(512 * 2 ** 20), "512 MiB");
  assert.equal(bytes(4 * 2 ** 30), "4 GiB");
  assert.equal(bytes(1), "1 byte");
  assert.equal(bytes(1536), "1.5 KiB");
  assert.equal(bytes(98_362_432), "93.8 MiB"); // the real model's file
  assert.equal(bytes(256 * 2 ** 20), "256 MiB"); // the largest GGUF file decodelab reads
  // a download's progress: both numbers in the whole's unit, so they compare
  assert.equal(bytesOf(6_400_000, 17_700_000), "6.1 of 16.9 MiB");
  assert.equal(bytesOf(512 * 1024, 98_362_432), "0.5 of 93.8 MiB");
  assert.equal(bytesOf(0, 2048), "0.0 of 2.0 KiB");
});

test("why a run stopped, in words and as the trace writes it", () => {
  assert.equal(finishSentence("stop", "eos", 50), "Stopped at end-of-sequence.");
  assert.equal(finishSentence("stop", "an", 50), "Stopped at stop string “an”.");
  assert.equal(finishSentence("length", null, 1), "Hit the limit of 1 new token: the output may be incomplete.");
  assert.equal(finishSentence("cancelled", null, 5), "Stopped by you.");
  assert.equal(finishSentence("tool_calls", "tool_call", 5), "Stopped at a tool call: tool calls are off, so the call is shown and not run.");
  assert.equal(finishCode("stop", "eos"), "finish_reason stop · stop_reason eos");
  assert.equal(finishCode("stop", " x"), "finish_reason stop · stop_reason “␣x”");
  assert.equal(finishCode("length", null), "finish_reason length · stop_reason null");
});

test("a sampled step's odds are after the rules; a greedy step's are the model's own", () => {
  const step = { prob: 1, entropy: 0, logprob: Math.log(0.25), entropy_raw: 1.2 };
  assert.deepEqual(stepOdds(step, true), { p: 0.25, entropy: 1.2, whose: "the model’s own" });
  assert.deepEqual(stepOdds({ ...step, prob: 0.4, entropy: 0.9 }, false), { p: 0.4, entropy: 0.9, whose: "after the rules" });
});

test("the draw strip lays the kept tokens end to end in id order, when all of them were recorded", () => {
  const top = [
    { token_id: 5, kept: true, p_final: 0.5 }, { token_id: 2, kept: true, p_final: 0.3 },
    { token_id: 9, kept: true, p_final: 0.2 }, { token_id: 1, kept: false, p_final: 0 },
  ];
  const segs = drawSegments({ u: 0.6, token_id: 5, kept_count: 3, top });
  assert.deepEqual(segs.map((s) => [s.token.token_id, s.start, s.width, s.chosen]), [[2, 0, 0.3, false], [5, 0.3, 0.5, true], [9, 0.8, 0.2, false]]);
  assert.ok(segs[1].start <= 0.6 && 0.6 < segs[1].start + segs[1].width); // u lands in the chosen one
  assert.equal(drawSegments({ u: 0.6, token_id: 5, kept_count: 4, top }), null); // one kept is not listed
  assert.equal(drawSegments({ u: null, token_id: 5, kept_count: 3, top }), null); // greedy: no draw
});

test("a refused run names each field at fault and says what to do", async () => {
  const { refusedWords } = await import("../../web/ui/runbar.js");
  assert.equal(refusedWords(["Top-p"]), "Not generated: change Top-p as its message says, then try again.");
  assert.equal(refusedWords(["The conversation"]), "Not generated: change the conversation as its message says, then try again.");
  assert.equal(refusedWords(["Top-p", "Seed", "Stop strings"]), "Not generated: change Top-p, Seed and Stop strings as their messages say, then try again.");
});
