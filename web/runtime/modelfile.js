// The real model's file, for the worker: found in this browser's Cache Storage, or downloaded
// from the site with its progress, and always checked against the SHA-256 the site lists
// (models/models.json, written by the build) before Python reads a byte of it.
//
// The file is kept apart from the service worker's offline copy of the site (94 MiB would make
// every new build's install that much bigger): in a cache of its own, "decodelab-model <site>",
// under its digest, so a return visit, online or not, reads it from there. A kept copy whose
// digest does not match is deleted and the file downloaded again. Where Cache Storage is missing
// or refuses the file (private windows, a full disk), the model still loads; it is just not kept.
// Keeping and checking the copy is kept.js's, reading the download downloads.js's, as for the
// files a start keeps and fetches.

import { every, readBody } from "./downloads.js";
import { bytesOf } from "../ui/bytes.js";
import { sha256Hex } from "./integrity.js";
import { dropAll, find, keep } from "./kept.js";

const SITE = new URL("../", import.meta.url);
const LIST = new URL("models/models.json", SITE);
const CACHE = `decodelab-model ${SITE.href}`;
const EVERY_MS = 100; // at most this often a progress report

/** A problem with the file, in the page's words; `kind` says which ("absent", "damaged", ...). */
export class ModelFileError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

/** The site's entry for `model` ({model, path, bytes, sha256, credit, license}), or a ModelFileError. */
export async function listed(model) {
  let files = [];
  try {
    const response = await fetch(LIST, { cache: "no-cache" });
    if (response.ok) files = (await response.json()).files || [];
  } catch {
    throw new ModelFileError("offline", "The list of this site's models could not be read: the site is not reachable, and this browser has not kept it.");
  }
  const entry = files.find((f) => f.model === model);
  if (!entry) throw new ModelFileError("absent", "This site was built without the real model's file, so it cannot be loaded here; the trained models work as before.");
  return { ...entry, url: new URL(entry.path, SITE).href };
}

/** Where the copy of `entry`'s file is kept: under its digest, in the cache of the site's models. */
function placeOf(entry) {
  return { kind: "model file", cache: CACHE, prefix: new URL("models/", SITE).href, key: `${entry.url}#sha256=${entry.sha256}`, sha256: entry.sha256 };
}

/** The kept copy goes (the page's "Forget the kept copy"). */
export function forget() {
  return dropAll(CACHE);
}

/** The file's bytes from the network, into one buffer of the listed size, with progress. */
async function download(entry, signal, report) {
  let response;
  try {
    response = await fetch(entry.url, { signal, cache: "no-store" });
  } catch (err) {
    if (signal.aborted) throw err;
    throw new ModelFileError("network", "The download of the model failed: the site is not reachable. Try again when it is.");
  }
  if (!response.ok || !response.body) throw new ModelFileError("network", `The download of the model failed (HTTP ${response.status}). Try again.`);
  const bytes = new Uint8Array(entry.bytes);
  const began = performance.now();
  const cut = (got) => new ModelFileError("cut", `The download stopped after ${bytesOf(got, entry.bytes)}. Try again.`);
  const progress = every(EVERY_MS, (got) => {
    const rate = got / Math.max(performance.now() - began, 1); // bytes per ms
    report({ phase: "download", got, total: entry.bytes, left_ms: Math.round((entry.bytes - got) / rate) });
  });
  let got = 0;
  try {
    got = await readBody(response, (chunk, upTo) => {
      if (upTo > entry.bytes) throw new ModelFileError("damaged", "The download is longer than the file the site lists, so it is not that file. Nothing was kept; try again.");
      bytes.set(chunk, got);
      got = upTo;
      progress(got);
    });
  } catch (err) {
    if (signal.aborted || err instanceof ModelFileError) throw err;
    throw cut(got);
  }
  if (got !== entry.bytes) throw cut(got);
  report({ phase: "download", got, total: entry.bytes, left_ms: 0 });
  return { bytes, ms: Math.round(performance.now() - began) };
}

/**
 * The checked bytes of `model`'s file: {bytes, entry, from: "kept" | "site", kept, ms: {download, check}}.
 * report({phase, got, total, left_ms}) hears the download's progress and the check. Stopped by
 * `signal` (an AbortError); a problem is a ModelFileError with its sentence.
 */
export async function obtain(model, signal, report) {
  const entry = await listed(model);
  const ms = { download: 0, check: 0 };
  const place = placeOf(entry);
  const found = await find(place);
  if (found.bytes) return { bytes: found.bytes, entry, from: "kept", kept: true, ms };
  const got = await download(entry, signal, report);
  ms.download = got.ms;
  report({ phase: "check", got: entry.bytes, total: entry.bytes, left_ms: 0 });
  const began = performance.now();
  const digest = await sha256Hex(got.bytes);
  ms.check = Math.round(performance.now() - began);
  if (signal.aborted) throw new DOMException("stopped", "AbortError");
  if (digest !== entry.sha256) throw new ModelFileError("damaged", "The downloaded file is damaged: its SHA-256 is not the one this site lists for it. Nothing was kept; try again.");
  const isKept = await keep(place, got.bytes, digest);
  return { bytes: got.bytes, entry, from: "site", kept: isKept, ms };
}

/**
 * A GGUF file the learner opened from disk (a File, handed to the worker as it is): its bytes,
 * in the shape `obtain` gives, {bytes, entry: {name, bytes}, from: "disk", kept: false, ms}.
 * Nothing is checked here but that it can be read; Python says what else is wrong with it.
 */
export async function fromDisk(file) {
  const began = performance.now();
  let bytes;
  try {
    bytes = new Uint8Array(await file.arrayBuffer());
  } catch {
    throw new ModelFileError("unreadable", `Your file ${file.name} could not be read by this browser (moved or deleted since it was chosen?). Choose it again.`);
  }
  return { bytes, entry: { name: file.name, bytes: file.size }, from: "disk", kept: false, ms: { download: 0, check: 0, file: Math.round(performance.now() - began) } };
}
