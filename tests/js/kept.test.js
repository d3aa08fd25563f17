// The one keeper of kept files (web/runtime/kept.js) and the one download loop
// (web/runtime/downloads.js), without a browser: Cache Storage is an in-memory stand-in with the
// same calls (open, match, put, keys, delete), so what is tested is the keeper's own rules: a
// copy is used only when its bytes have their digest, a damaged one is deleted, and keeping a
// copy replaces the copies of its kind made from other files, leaving other kinds alone.

import assert from "node:assert/strict";
import { test } from "node:test";

import { every, readBody } from "../../web/runtime/downloads.js";
import { sha256Hex } from "../../web/runtime/integrity.js";
import { drop, dropAll, find, keep } from "../../web/runtime/kept.js";

function fakeCaches() {
  const stores = new Map();
  const open = async (name) => {
    if (!stores.has(name)) stores.set(name, new Map());
    const entries = stores.get(name);
    return {
      match: async (url) => (entries.has(url) ? entries.get(url).clone() : undefined),
      put: async (url, response) => { entries.set(url, response); },
      keys: async () => [...entries.keys()].map((url) => ({ url })),
      delete: async (request) => entries.delete(typeof request === "string" ? request : request.url),
    };
  };
  return { open, delete: async (name) => stores.delete(name), stores };
}

const bytes = (text) => new TextEncoder().encode(text);

test("a kept copy is found whole, and replaces the copies of its kind from other files", async () => {
  globalThis.caches = fakeCaches();
  const place = { kind: "bytecode", cache: "c", prefix: "https://x/bytecode/", key: "https://x/bytecode/new" };
  const older = { ...place, key: "https://x/bytecode/old" };
  const other = { kind: "snapshot", cache: "c", prefix: "https://x/snapshot/", key: "https://x/snapshot/a" };
  assert.equal((await find(place)).state, "none");
  assert.equal(await keep(older, bytes("old")), true);
  assert.equal(await keep(other, bytes("snap")), true);
  assert.equal(await keep(place, bytes("new")), true);
  const found = await find(place);
  assert.equal(found.state, "kept");
  assert.equal(new TextDecoder().decode(found.bytes), "new");
  assert.equal((await find(older)).state, "none"); // replaced
  assert.equal((await find(other)).state, "kept"); // another kind stays
  await drop(place);
  assert.equal((await find(place)).state, "none");
  await dropAll("c");
  assert.equal((await find(other)).state, "none");
});

test("a damaged copy, or one without the digest known beforehand, is deleted and not used", async () => {
  globalThis.caches = fakeCaches();
  const place = { kind: "model file", cache: "m", prefix: "https://x/models/", key: "https://x/models/f#sha256" };
  await keep(place, bytes("the file"));
  const entries = globalThis.caches.stores.get("m");
  const kept = entries.get(place.key);
  // the bytes changed under the digest kept beside them
  entries.set(place.key, new Response(bytes("the fil3"), { headers: kept.headers }));
  assert.equal((await find(place)).state, "none");
  assert.equal(entries.has(place.key), false);
  // whole bytes, but not the file the site lists now
  await keep(place, bytes("the file"));
  const listed = { ...place, sha256: await sha256Hex(bytes("another file")) };
  assert.equal((await find(listed)).state, "none");
  await keep(place, bytes("another file"), listed.sha256);
  assert.equal((await find(listed)).state, "kept");
});

test("without Cache Storage nothing is kept, and nothing fails", async () => {
  delete globalThis.caches;
  const place = { kind: "bytecode", cache: "c", prefix: "https://x/b/", key: "https://x/b/k" };
  assert.equal((await find(place)).state, "off");
  assert.equal(await keep({ ...place, key: null }, bytes("x")), false);
  await dropAll("c");
});

test("a download's body is read piece by piece, in order, to its end", async () => {
  const pieces = [bytes("abc"), bytes("de"), bytes("f")];
  const body = new ReadableStream({ start(c) { for (const p of pieces) c.enqueue(p); c.close(); } });
  const seen = [];
  const got = await readBody(new Response(body), (chunk, upTo) => seen.push([new TextDecoder().decode(chunk), upTo]));
  assert.equal(got, 6);
  assert.deepEqual(seen, [["abc", 3], ["de", 5], ["f", 6]]);
  // a taker that refuses a piece ends the read with its error
  const again = new Response(new ReadableStream({ start(c) { for (const p of pieces) c.enqueue(p); c.close(); } }));
  await assert.rejects(readBody(again, (chunk, upTo) => { if (upTo > 4) throw new Error("too long"); }), /too long/);
});

test("reports are spaced, and the last one is said at once", () => {
  const said = [];
  const say = every(60_000, (x) => said.push(x));
  say(1);
  say(2); // within the minute: not said
  say.now(3);
  assert.deepEqual(said, [1, 3]);
});
