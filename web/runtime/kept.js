// What one visit keeps for the next, in the browser's Cache Storage: the one keeper of the page's
// kept files. Each copy is a place {kind, cache, prefix, key}: a copy is found under its key,
// checked by the SHA-256 of its bytes before use (a damaged one is deleted), kept with that
// digest beside it, and replaces the copies of the same kind (its prefix) made from other files.
// Two sorts of copies use it: what a start keeps, below, and the real model's file
// (modelfile.js), which keeps a cache of its own under the file's listed SHA-256.
//
// A start keeps what a return visit would otherwise make again with the same result:
//
// - "runtime-snapshot": a copy of Python's memory right after the runtime is up, before any
//   package is loaded (Pyodide 0.27 cannot restore a memory that holds numpy's compiled
//   modules), with the standard-library modules the start needs already imported (snapshot.js).
//   Restoring it replaces the interpreter's own set-up, about a second of WebAssembly.
// - "bytecode": numpy's and the package's modules compiled to bytecode (bytecode.js). Pyodide's
//   numpy comes as source, and a fresh file system would have every module compiled again.
//
// Each thing is keyed by the integrity values of the files it came from (the runtime's checked
// list, integrity.js) and by the recipe that made it (the snapshot's list of modules), so it is only ever used with the very files that made it: new files make
// a new one and the old one is deleted. A new build of the lesson that leaves those files alone
// keeps it. Each copy carries the SHA-256 of its bytes, checked before use (some 30 ms for the
// snapshot's 25 MB). A copy that does not match or cannot be read is deleted, and so is one
// that a start used before failing; that start, or the next, is a plain one. Where Cache
// Storage is missing (a page served over plain HTTP from another machine) or refused (as in
// some browsers' private windows), every start is a plain one.

import { sha256Hex } from "./integrity.js";

const CACHE_PREFIX = "decodelab-kept ";
const DIGEST_HEADER = "X-Decodelab-SHA256";

function usable() {
  return typeof caches !== "undefined" && typeof caches.open === "function";
}

/**
 * The kept `kind` made from the runtime files `paths` of dirUrl, whose checked list is `list`
 * (integrity.js's entries), and from `recipe` (words for whatever else decides its bytes):
 * {kind, bytes, key, cache, state}. `bytes` is a Uint8Array when a copy is kept (state "kept");
 * else null, with state "none" (make one) or "off" (it cannot be kept here).
 */
export async function findKept(dirUrl, list, kind, paths, recipe = "") {
  const off = { kind, bytes: null, key: null, prefix: null, cache: null, state: "off" };
  if (!usable()) return off;
  const byPath = new Map(list.map((file) => [file.path, file.integrity]));
  if (!paths.every((path) => byPath.has(path))) return off;
  const prefix = new URL(`${kind}/`, dirUrl).href;
  const made = [...paths.map((path) => byPath.get(path)), ...(recipe ? [recipe] : [])].join("\n");
  const key = prefix + (await sha256Hex(new TextEncoder().encode(made))).slice(0, 32);
  return find({ kind, key, prefix, cache: CACHE_PREFIX + dirUrl });
}

/**
 * The copy kept at `place` ({kind, cache, prefix, key}, and `sha256` when the digest its bytes
 * must have is known beforehand): {...place, bytes, state} as findKept says it. A copy whose
 * bytes do not have the digest kept beside them (or the one known) is deleted, and not used.
 */
export async function find(place) {
  if (!usable()) return { ...place, bytes: null, key: null, state: "off" };
  const found = { ...place, bytes: null, state: "none" };
  try {
    const response = await (await caches.open(place.cache)).match(place.key);
    if (!response) return found;
    const bytes = new Uint8Array(await response.arrayBuffer());
    if (await sha256Hex(bytes) !== (place.sha256 || response.headers.get(DIGEST_HEADER))) {
      console.warn(`The ${place.kind} kept by an earlier visit is damaged; it is not used.`);
      await drop(found);
      return found;
    }
    return { ...found, bytes, state: "kept" };
  } catch {
    return { ...place, bytes: null, key: null, state: "off" };
  }
}

/**
 * Keep `bytes` as `found`'s thing (their SHA-256, `digest`, is computed when not given); copies
 * of the same kind from other files go. Says whether it could; never throws.
 */
export async function keep(found, bytes, digest = null) {
  if (!found.key) return false;
  try {
    const cache = await caches.open(found.cache);
    for (const request of await cache.keys()) {
      if (request.url.startsWith(found.prefix) && request.url !== found.key) await cache.delete(request);
    }
    const headers = { "Content-Type": "application/octet-stream", [DIGEST_HEADER]: digest || await sha256Hex(bytes) };
    await cache.put(found.key, new Response(bytes, { headers }));
    return true;
  } catch (err) {
    console.warn(`The ${found.kind} was not kept for the next visit: ${(err && err.message) || err}`);
    return false;
  }
}

/** Delete `found`'s copy (it could not be used). Never throws. */
export async function drop(found) {
  if (!found || !found.key) return;
  try {
    await (await caches.open(found.cache)).delete(found.key);
  } catch {
    // nothing kept, nothing to delete
  }
}

/** Delete every copy kept in `cache` (the learner takes the storage back). Never throws. */
export async function dropAll(cache) {
  if (usable()) await caches.delete(cache).catch(() => false);
}
