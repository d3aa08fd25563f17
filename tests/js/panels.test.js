// What the panels work out for display from Python's numbers, without a document: the CSV of a
// run (ui/exports.js), the check chart's envelope (kv/cache.js), two runs
// compared (lesson/runs.js), a loop at the end of a text and the Try this lists (lesson/tries/).

import assert from "node:assert/strict";
import { test } from "node:test";

import { envelope } from "../../web/kv/cache.js";
import { firstDifference, settingsDiff } from "../../web/lesson/runs.js";
import { TRIES as ANSWERS } from "../../web/lesson/tries/answers.js";
import { TRIES as CACHE } from "../../web/lesson/tries/cache.js";
import { TRIES as ENDS } from "../../web/lesson/tries/ends.js";
import { TRIES as PAGING } from "../../web/lesson/tries/paging.js";
import { TRIES as SAMPLING, findLoop, sameLoop } from "../../web/lesson/tries/sampling.js";
import { TRIES as SEARCH } from "../../web/lesson/tries/search.js";
import { TRIES as START } from "../../web/lesson/tries/start.js";
import { TRIES as STOPPING, spacedWords } from "../../web/lesson/tries/stopping.js";
import { CSV_COLUMNS, traceToCsv } from "../../web/ui/exports.js";
import { fromBase64 } from "../../web/ui/handoff.js";

test("the CSV has one row per candidate per step, quoted where a spreadsheet needs it", () => {
  const trace = { settings: { tokenizer: "bpe" }, steps: [{ step: 0, phase: "prefill", token_id: 2, u: 0.5, entropy: 0.7,
    top: [{ token_id: 2, token_text: "a,\"b\"", p_raw: 0.6, p_temp: 0.6, kept: true, p_final: 1 }, { token_id: 3, token_text: " x", p_raw: 0.4, p_temp: 0.4, kept: false, p_final: 0 }] }] };
  const lines = traceToCsv(trace).split("\r\n");
  assert.equal(lines[0], CSV_COLUMNS.join(","));
  assert.equal(lines[1], '0,prefill,2,"a,""b""",0.6,0.6,true,1,true,0.5,0.7,bpe');
  assert.equal(lines[2], '0,prefill,3," x",0.4,0.4,false,0,false,0.5,0.7,bpe');
  assert.equal(lines[3], "");
});

test("the check chart keeps every spike of a long run in two points per column", () => {
  const points = Array.from({ length: 1000 }, (_, i) => [i + 1, i === 500 ? 9 : 1e-15]);
  const out = envelope(points, 50);
  assert.ok(out.length <= 2 * 50 + 2);
  assert.deepEqual(out[0], points[0]);
  assert.deepEqual(out.at(-1), points.at(-1));
  assert.ok(out.some(([x, y]) => x === 501 && y === 9)); // the spike is still drawn
  assert.equal(envelope(points.slice(0, 10), 50).length, 10); // few points: all of them
});

test("two runs compared: what differs, and the first step where they part", () => {
  const specs = { seed: { label: "Seed" }, temperature: { label: "Temperature" }, stop: { label: "Stop strings" } };
  assert.deepEqual(settingsDiff({ seed: 5, temperature: 0.3, stop: [] }, { seed: 5, temperature: 2, stop: [" "] }, specs),
    [["Temperature", "0.3", "2"], ["Stop strings", "none", "“␣”"]]);
  const tokens = (ids) => ({ tokens: ids.map((id) => ({ id })) });
  assert.equal(firstDifference(tokens([1, 2, 3]), tokens([1, 2, 4])), 2);
  assert.equal(firstDifference(tokens([1, 2]), tokens([1, 2, 3])), 2);
  assert.equal(firstDifference(tokens([1, 2]), tokens([1, 2])), null);
});

test("a loop at the end of a text: the shortest stretch repeated to the end", () => {
  assert.deepEqual(findLoop("the cat the cat the cat"), { start: 0, loop: "the cat " });
  assert.deepEqual(findLoop("xyzababab"), { start: 3, loop: "ab" });
  assert.equal(findLoop("abcdef"), null);
});

test("the candidates that start with a space are counted before their share is said", () => {
  const top = [{ token_text: "s", p_raw: 0.5 }, { token_text: "ure", p_raw: 0.2 }];
  assert.equal(spacedWords(top), "not one of its 2 likeliest candidates starts with a space");
  assert.equal(spacedWords([...top, { token_text: " was", p_raw: 0.0004 }]),
    "the 1 of its 3 likeliest candidates that start with a space held only <0.1%");
});

test("a loop read from another character is the same loop, not a new one", () => {
  const a = findLoop("The e the the the the");
  assert.ok(sameLoop(a, findLoop("The xe th the the the th")));
  assert.ok(sameLoop(a, a));
  assert.ok(!sameLoop(a, findLoop("The ofofofofof")));
  assert.ok(!sameLoop(a, null) && !sameLoop(null, a));
});

test("the zip's bytes come back whole from base64, every byte value included", () => {
  const bytes = Uint8Array.from({ length: 256 * 3 }, (_, i) => (i * 7) % 256);
  const text = Buffer.from(bytes).toString("base64"); // as Python's base64 writes it
  assert.deepEqual(fromBase64(text), bytes);
  assert.deepEqual(fromBase64(""), new Uint8Array(0));
});

test("each chapter's Try this suggestions go to that chapter's list, each with an id of its own", () => {
  const chapters = { sampling: SAMPLING, lesson: START, ends: ENDS, tokens: STOPPING, tools: ANSWERS, kv: CACHE, search: SEARCH, serving: PAGING };
  for (const [where, tries] of Object.entries(chapters)) {
    assert.ok(tries.length);
    assert.deepEqual([...new Set(tries.map((t) => t.where))], [where]);
  }
  const ids = Object.values(chapters).flat().map((t) => t.id);
  assert.equal(new Set(ids).size, ids.length);
});
