// The course's rules (web/course/progress.js) and the store's part in them (web/state/store.js):
// which chapter an address opens, the way on, what the map says, what is kept between visits,
// and a Try this's trip to the workbench and back. No document needed.

import assert from "node:assert/strict";
import { test } from "node:test";

import { chapterProgress, neighbours, readKept, resolveHash } from "../../web/course/progress.js";
import { createStore } from "../../web/state/store.js";

const NAMES = ["start", "sampling", "stopping", "cache"];
const HOLDERS = { kvcache: "cache", "try-budget": "start", workbench: "start" };
const chapterOf = (id) => HOLDERS[id] || null;

test("an address opens a chapter by its name, or the chapter holding an element, at that element", () => {
  assert.deepEqual(resolveHash("", NAMES, chapterOf), { chapter: "start", target: null });
  assert.deepEqual(resolveHash("#sampling", NAMES, chapterOf), { chapter: "sampling", target: null });
  assert.deepEqual(resolveHash("#kvcache", NAMES, chapterOf), { chapter: "cache", target: "kvcache" });
  assert.deepEqual(resolveHash("#workbench", NAMES, chapterOf), { chapter: "start", target: "workbench" });
  // an address that names nothing on the page opens the first chapter, not an empty page
  assert.deepEqual(resolveHash("#nowhere", NAMES, chapterOf), { chapter: "start", target: null });
  assert.deepEqual(resolveHash("#%E2%9C%93", NAMES, chapterOf), { chapter: "start", target: null });
  assert.deepEqual(resolveHash("#%E2", NAMES, chapterOf), { chapter: "start", target: null });
});

test("each chapter's neighbours: none before the first, none after the last", () => {
  assert.deepEqual(neighbours(NAMES, "start"), { prev: null, next: "sampling" });
  assert.deepEqual(neighbours(NAMES, "stopping"), { prev: "sampling", next: "cache" });
  assert.deepEqual(neighbours(NAMES, "cache"), { prev: "stopping", next: null });
  assert.deepEqual(neighbours(NAMES, "gone"), { prev: null, next: null });
});

test("the map's words follow the suggestions tried and the chapters read", () => {
  const tries = ["a", "b", "c"];
  assert.deepEqual(chapterProgress(tries, [], false), { mark: "new", words: "3 to try" });
  assert.deepEqual(chapterProgress(tries, [], true), { mark: "seen", words: "read, 3 to try" });
  assert.deepEqual(chapterProgress(tries, ["b", "x"], true), { mark: "started", words: "1 of 3 tried" });
  assert.deepEqual(chapterProgress(tries, ["c", "a", "b"], true), { mark: "done", words: "all 3 tried" });
  assert.deepEqual(chapterProgress([], [], true), { mark: "seen", words: "read" });
  assert.deepEqual(chapterProgress([], ["a"], false), { mark: "new", words: "" });
});

test("progress kept from an earlier visit is read without trusting it", () => {
  const kept = readKept(JSON.stringify({ seen: ["cache", "old-chapter"], tried: ["a", 7, "z"] }), NAMES, ["a", "b"]);
  assert.deepEqual(kept, { seen: ["cache"], tried: ["a"] });
  for (const broken of ["", "{", "null", "[1,2]", '"text"', JSON.stringify({ seen: "cache" })]) {
    assert.deepEqual(readKept(broken, NAMES, ["a"]), { seen: [], tried: [] }, broken);
  }
});

test("the store owns the course: the chapter, what was seen and tried, and a trip and its return", () => {
  const store = createStore();
  const heard = [];
  store.subscribe((change) => heard.push(change.type));
  store.openChapter("stopping", { source: "address" });
  assert.equal(store.state.course.chapter, "stopping");
  assert.deepEqual(store.state.course.seen, ["stopping"]);

  // a Try this in "stopping" takes the learner to the workbench, and the trip lasts the run
  store.trip({ id: "budget", from: "stopping", text: "Set a budget", status: "running" });
  store.openChapter("start", { source: "trip" });
  assert.equal(store.state.course.trip.status, "running");
  store.trip({ id: "budget", status: "done", answer: "It stopped at 5." });
  store.tried("budget");
  store.tried("budget");
  assert.deepEqual(store.state.course.trip, { id: "budget", from: "stopping", text: "Set a budget", status: "done", answer: "It stopped at 5." });
  assert.deepEqual(store.state.course.tried, ["budget"]);

  // the way back ends the trip; so does leaving for another chapter on one's own
  store.openChapter("stopping", { target: "try-budget", source: "back" });
  assert.equal(store.state.course.trip, null);
  store.trip({ id: "k", from: "cache", text: "t", status: "running" });
  store.openChapter("start", { source: "trip" });
  store.openChapter("sampling", { source: "address" });
  assert.equal(store.state.course.trip, null);
  assert.deepEqual(store.state.course.seen, ["stopping", "start", "sampling"]);

  store.restoreProgress({ seen: ["cache", "start"], tried: ["x"] });
  assert.deepEqual(store.state.course.seen, ["stopping", "start", "sampling", "cache"]);
  assert.deepEqual(store.state.course.tried, ["budget", "x"]);
  assert.deepEqual([...new Set(heard)].sort(), ["chapter", "progress", "trip"]);
});
