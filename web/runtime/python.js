// Python in the worker, started: Pyodide from its checked files (integrity.js) or from what this
// browser kept of its last start (kept.js: the runtime's snapshot, numpy and the package as
// installed, their bytecode), numpy and the decodelab package, the lesson files copied into
// Pyodide's file system, and decodelab.entry.webapi set up. The start says how far it has come
// (progress, with the bytes that have come), and after it the warm-up run and what the next
// start can keep. worker.js serves the pages; this module is Python's side of the worker.

import { useInterruptBuffer, watchFatal } from "./health.js";
import { guardRuntime, runtimeProblem, sha256Hex } from "./integrity.js";
import { createDownloads } from "./downloads.js";
import { bytesOf } from "../ui/bytes.js";
import { packBytecode, settleSources, unpackBytecode, useBytecodeDir } from "./bytecode.js";
import { drop, findKept, keep } from "./kept.js";
import { packInstalled, restoreInstalled } from "./installed.js";
import { SNAPSHOT_MODULES, importedSinceSnapshot, looksLikeSnapshot, prepareForSnapshot } from "./snapshot.js";

const PYODIDE_DIR = new URL("../pyodide/", import.meta.url).href;
const ASSETS_URL = new URL("../assets/", import.meta.url);
export const ASSETS_FS = "/assets";
export const BOOT_SESSION = "page"; // the session start-up sets up (a dedicated worker's only one)

/** Python once started: the Pyodide instance and decodelab.entry.webapi (a PyProxy kept for the
 * worker's lifetime); ready once the start has finished without error. */
export const python = { pyodide: null, webapi: null, ready: false };
let broadcast = () => {};
let bootStart = 0;
let snapshot = null; // the runtime's memory snapshot (kept.js) this start found
let bytecode = null; // the kept bytecode of numpy and the package (bytecode.js)
let installed = null; // numpy and the package as installed (installed.js)

let shown = { phase: "runtime", label: "", fraction: 0 }; // the start's latest progress

function progress(phase, label, fraction) {
  shown = { phase, label, fraction: Math.max(fraction, shown.fraction) };
  broadcast({ type: "progress", ...shown, ms: Math.round(performance.now() - bootStart) });
}

// While the runtime, numpy, the package and the lesson files download, the phase's words say how
// much has come, and the bar follows the bytes up to where the package phase starts.
const DOWNLOAD_BAR = [0.02, 0.75];
const downloads = createDownloads(({ got, total, done }) => {
  if (!total || python.ready) return;
  const label = shown.label.replace(/ [\d.]+ of [\d.]+ [KMG]iB$/, "");
  const bytes = done ? "" : ` ${bytesOf(got, total)}`;
  const fraction = DOWNLOAD_BAR[0] + (DOWNLOAD_BAR[1] - DOWNLOAD_BAR[0]) * Math.min(1, got / total);
  progress(shown.phase, label + bytes, fraction);
});

// A Python exception's message is its whole traceback; its last line says what went wrong.
export function describeError(err) {
  const text = String((err && err.message) || err || "unknown error").trim();
  const lines = text.split("\n").map((s) => s.trim()).filter(Boolean);
  return { message: lines.length ? lines[lines.length - 1] : text, detail: text };
}

/** The start's latest progress, for a page that connects while it goes on (null before any). */
export function progressNow() {
  return shown.label ? { type: "progress", ...shown, ms: Math.round(performance.now() - bootStart) } : null;
}

/** What this start used may be what broke it: the next start begins afresh. */
export function dropKept() {
  if (snapshot && snapshot.bytes) drop(snapshot);
  if (bytecode && bytecode.bytes) drop(bytecode);
  if (installed && installed.bytes) drop(installed);
}

// The one way into Python: an endpoint of decodelab.entry.webapi by name, a plain object in, a plain
// object out ({ok: true, ...} or {ok: false, errors: [{field, label, message}]}).
export function call(session, endpoint, request = {}) {
  return JSON.parse(python.webapi.call(endpoint, JSON.stringify(request), session, true));
}

function mkdirTree(path) {
  const dir = path.slice(0, path.lastIndexOf("/"));
  if (dir) python.pyodide.FS.mkdirTree(dir);
}

async function loadPythonPackage(name) {
  const problems = [];
  const notes = [];
  await python.pyodide.loadPackage([name], {
    messageCallback: (msg) => notes.push(String(msg)),
    errorCallback: (msg) => problems.push(String(msg)),
  });
  // loadPackage reports a failed download, a hash mismatch or an unknown name only through
  // these callbacks, so check that the package really arrived.
  if (!(name in python.pyodide.loadedPackages)) {
    const said = problems.length ? problems : notes.filter((n) => !/^Loading|^Loaded/.test(n));
    const details = said.length ? ` Details: ${said.slice(-3).join(" ").trim()}` : "";
    throw new Error(`The ${name} package could not be loaded: its download failed or did not match the expected checksum.${details}`);
  }
}

async function fetchChecked(url, what) {
  let response;
  try {
    response = await fetch(url);
  } catch (err) {
    throw new Error(`Could not download ${what}: ${err.message || err}.`);
  }
  if (!response.ok) throw new Error(`Could not download ${what} (HTTP ${response.status}).`);
  return response;
}

async function loadAssets() {
  const manifestResponse = await fetchChecked(new URL("manifest.json", ASSETS_URL), "the list of lesson files (assets/manifest.json)");
  const manifest = await manifestResponse.json();
  const files = Array.isArray(manifest.files) ? manifest.files : [];
  if (!files.length) throw new Error("The list of lesson files (assets/manifest.json) is empty.");
  downloads.expectMore(files.reduce((sum, file) => sum + (Number(file.bytes) || 0), 0));
  const lessons = files.filter((file) => !KERNELS.test(file.path)).length;
  let finished = 0;
  await Promise.all(files.map(async (file) => {
    if (typeof file.path !== "string" || file.path.includes("..") || file.path.startsWith("/")) {
      throw new Error(`The lesson file list names an unsafe path: ${JSON.stringify(file.path)}.`);
    }
    if (KERNELS.test(file.path)) { // not needed to start: a damaged copy leaves numpy's twin
      try {
        await loadAsset(file);
      } catch (err) {
        kernelsProblem = err.message;
      }
      return;
    }
    await loadAsset(file);
    finished += 1;
    progress("assets", `Checking the models and text (${finished} of ${lessons})…`, 0.85 + 0.15 * (finished / lessons));
  }));
  return files;
}

/** One file of the list, downloaded, checked against its size and SHA-256, written for Python. */
async function loadAsset(file) {
  const response = await fetchChecked(new URL(file.path, ASSETS_URL), `the lesson file ${file.path}`);
  downloads.watchMore(response);
  const buffer = await response.arrayBuffer();
  if (typeof file.bytes === "number" && buffer.byteLength !== file.bytes) {
    throw new Error(`The lesson file ${file.path} is damaged: it has ${buffer.byteLength} bytes, but ${file.bytes} were expected.`);
  }
  const hash = await sha256Hex(buffer);
  if (hash !== String(file.sha256).toLowerCase()) {
    throw new Error(`The lesson file ${file.path} is damaged: its SHA-256 checksum does not match.`);
  }
  const target = `${ASSETS_FS}/${file.path}`;
  mkdirTree(target);
  python.pyodide.FS.writeFile(target, new Uint8Array(buffer));
}

// decodelab's C kernels, built for WebAssembly (tools/kernels.py), come with the lesson files
// (checked as they are): loaded into Python's own heap, where ctypes opens them and they read
// numpy's arrays in place. Python is told what happened (setup's kernels): without them the
// real model's quantized engine runs the same arithmetic in numpy, and says so.
const KERNELS = /^kernels\/decodelab_kernels-[0-9a-f]+\.wasm\.so$/;
let kernelsProblem = null; // why the module's file could not be had, in words

async function loadKernels(files) {
  const file = files.find((f) => KERNELS.test(f.path));
  if (!file) return { kernels: null };
  if (kernelsProblem) {
    console.warn(`decodelab's C kernels were not loaded: ${kernelsProblem}`);
    return { kernels: null, kernels_problem: kernelsProblem };
  }
  const path = `${ASSETS_FS}/${file.path}`;
  try {
    await python.pyodide._module.loadDynamicLibrary(path, { global: true, nodelete: true, fs: python.pyodide.FS });
    return { kernels: path };
  } catch (err) {
    const problem = describeError(err).message;
    console.warn(`decodelab's C kernels did not load: ${problem}`);
    return { kernels: null, kernels_problem: problem };
  }
}

// The runtime files whose bytes decide the memory a snapshot holds. (The package list,
// pyodide-lock.json, is read by the loader's JavaScript on every start.)
const RUNTIME_FILES = ["pyodide.asm.js", "pyodide.asm.wasm", "pyodide.mjs", "python_stdlib.zip"];
// The wheels whose sources the kept bytecode was compiled from, and whose files are kept as
// installed (named as in integrity.json).
const BYTECODE_PACKAGES = ["numpy", "decodelab"];

// Pyodide started from the runtime's snapshot when there is one (kept.js); otherwise started
// afresh and then, where it can be kept, its memory copied for the next start, before any
// package is loaded. timings.snapshot says which: "restored", "made", or "none". A restored
// memory is reseeded, so two starts from one copy do not share random numbers.
async function startRuntime(loadPyodide, guard, timings) {
  const load = (extra) => Promise.race([guard.failed, loadPyodide({
    indexURL: PYODIDE_DIR, lockFileURL: PYODIDE_DIR + "pyodide-lock.json", ...extra,
  })]);
  if (snapshot.bytes && !looksLikeSnapshot(snapshot.bytes)) {
    console.warn("The runtime's snapshot is not one, so Python starts afresh.");
    await drop(snapshot);
    snapshot = { ...snapshot, bytes: null, state: "none" };
  }
  if (snapshot.bytes) {
    try {
      const restored = await load({ _loadSnapshot: snapshot.bytes });
      restored.runPython("import random; random.seed()"); // not the random state of the start that made it
      timings.snapshot = "restored";
      return restored;
    } catch (err) {
      if (runtimeProblem()) throw err; // a runtime file failed its check: no start can help
      console.warn(`The runtime's snapshot could not be restored, so Python starts afresh: ${describeError(err).message}`);
      await drop(snapshot);
      snapshot = { ...snapshot, bytes: null, state: "none" };
    }
  }
  if (snapshot.state !== "none") {
    timings.snapshot = "none";
    return load({});
  }
  const started = await load({ _makeSnapshot: true });
  timings.snapshot = "none";
  try {
    prepareForSnapshot(started);
    const bytes = started.makeMemorySnapshot(); // before any package: see snapshot.js
    timings.snapshot = "made";
    keep(snapshot, bytes); // saved while the start goes on
  } catch (err) {
    console.warn(`The runtime's snapshot was not made: ${describeError(err).message}`);
  }
  return started;
}

/** Start Python: the runtime, numpy, the package and the lesson files; resolves with setup's answer
 * and the start's timings. */
export async function startPython(broadcastTo) {
  broadcast = broadcastTo;
  bootStart = performance.now();
  const timings = {};
  let mark = bootStart;
  const lap = (key) => {
    const now = performance.now();
    timings[key] = Math.round(now - mark);
    mark = now;
  };

  progress("runtime", "Loading the Python runtime…", 0.02);
  const guard = await guardRuntime(PYODIDE_DIR, downloads.watch); // every runtime file is hash-checked before it runs
  downloads.expect(guard.list);
  lap("integrity_ms");
  let loadPyodide;
  try {
    ({ loadPyodide } = await import("../pyodide/pyodide.mjs"));
  } catch (err) {
    throw new Error(`The Python runtime (pyodide/pyodide.mjs) could not be loaded: ${err.message || err}.`);
  }
  snapshot = await findKept(PYODIDE_DIR, guard.list, "runtime-snapshot", RUNTIME_FILES, SNAPSHOT_MODULES.join(" "));
  const wheels = guard.list.map((file) => file.path)
    .filter((path) => path.endsWith(".whl") && BYTECODE_PACKAGES.some((name) => path.startsWith(`${name}-`)));
  const fromWheels = wheels.length === BYTECODE_PACKAGES.length;
  bytecode = fromWheels ? await findKept(PYODIDE_DIR, guard.list, "bytecode", [...RUNTIME_FILES, ...wheels]) : { state: "off", bytes: null };
  installed = fromWheels ? await findKept(PYODIDE_DIR, guard.list, "installed", [...RUNTIME_FILES, ...wheels]) : { state: "off", bytes: null };
  if (installed.bytes) downloads.skip(wheels); // not fetched this time, unless the copy fails
  if (snapshot.bytes) progress("runtime", "Restoring the Python runtime this browser kept from its last start…", 0.02);
  python.pyodide = await startRuntime(loadPyodide, guard, timings);
  timings.bytecode = bytecode.state === "kept" ? "kept" : "none";
  if (bytecode.state !== "off") useBytecodeDir(python.pyodide);
  if (bytecode.bytes) {
    try {
      unpackBytecode(python.pyodide, bytecode.bytes);
    } catch (err) {
      console.warn(`The kept bytecode is not used: ${err.message}`);
      timings.bytecode = "none";
      drop(bytecode);
      bytecode = { ...bytecode, bytes: null, state: "none" };
    }
  }
  watchFatal(python.pyodide, broadcast); // Python unusable from now on (out of memory): the pages restart us
  useInterruptBuffer(python.pyodide); // where the page is cross-origin isolated (supervisor.js)
  lap("runtime_ms");

  progress("numpy", "Loading numpy…", 0.55);
  timings.installed = "none";
  if (installed.bytes) {
    try {
      restoreInstalled(python.pyodide, installed.bytes, BYTECODE_PACKAGES);
      timings.installed = "kept";
    } catch (err) {
      console.warn(`The kept installed packages are not used: ${describeError(err).message}`);
      downloads.unskip();
      drop(installed);
      installed = { ...installed, bytes: null, state: "none" };
    }
  }
  if (timings.installed !== "kept") await loadPythonPackage("numpy");
  if (bytecode.state !== "off") settleSources(python.pyodide, "numpy");
  try {
    python.pyodide.pyimport("numpy").destroy();
  } catch (err) {
    throw new Error(`numpy was downloaded but cannot be imported: ${describeError(err).message}`);
  }
  lap("numpy_ms");

  progress("decodelab", "Loading the decodelab package…", 0.75);
  if (timings.installed !== "kept") await loadPythonPackage("decodelab");
  if (bytecode.state !== "off") settleSources(python.pyodide, "decodelab");
  try {
    python.webapi = python.pyodide.pyimport("decodelab.entry.webapi");
  } catch (err) {
    throw new Error(`The decodelab package was downloaded but cannot be imported: ${describeError(err).message}`);
  }
  lap("decodelab_ms");

  progress("assets", "Checking the models and text…", 0.85);
  const kernels = await loadKernels(await loadAssets());
  let info;
  try {
    info = call(BOOT_SESSION, "setup", { assets: ASSETS_FS, ...kernels });
  } catch (err) {
    throw new Error(`The models could not be set up: ${describeError(err).message}`);
  }
  if (!info.ok) throw new Error(`The models could not be set up: ${info.errors.map((e) => e.message).join(" ")}`);
  lap("assets_ms");

  timings.total_ms = Math.round(performance.now() - bootStart);
  timings.imported_after_snapshot = importedSinceSnapshot(python.pyodide);

  python.ready = true;
  progress("ready", "Ready.", 1);
  return { info, timings };
}

/** After the start has been announced: the warm-up run, and what the next start can keep. The
 * pages' requests wait for these (they queue behind the start). */
export function afterStart(booted) {
  warmUp(booted);
  if (bytecode.state === "none") keepBytecode(booted);
  if (installed.state === "none") keepInstalled(booted);
}

// One short run of each model as soon as the page has opened, while the learner reads
// (webapi.warm_up says why): the first run the learner starts is then as smooth as every later
// one, and a run asked for meanwhile waits a few tenths of a second at most. Only an
// optimisation: if it fails, a real run reports whatever is wrong next to its fields.
function warmUp(booted) {
  const t0 = performance.now();
  try {
    call(BOOT_SESSION, "warm_up");
  } catch (err) {
    console.warn(`The warm-up run failed: ${describeError(err).detail}`);
  }
  booted.timings.warmup_ms = Math.round(performance.now() - t0);
  broadcast({ type: "warmed-up", ms: booted.timings.warmup_ms });
}

// After a start that found no kept bytecode: keep what Python wrote (bytecode.js).
function keepBytecode(booted) {
  try {
    const t0 = performance.now();
    const { pack, files } = packBytecode(python.pyodide);
    if (files) keep(bytecode, pack);
    booted.timings.bytecode_pack = { files, bytes: pack.byteLength, ms: Math.round(performance.now() - t0) };
  } catch (err) {
    console.warn(`The bytecode was not kept for the next start: ${describeError(err.errno ? `file system error ${err.errno}` : err).message}`);
  }
}

// After a start that found no kept installed packages: keep them as installed (installed.js).
function keepInstalled(booted) {
  try {
    const { pack, files } = packInstalled(python.pyodide, BYTECODE_PACKAGES);
    if (files) keep(installed, pack);
  } catch (err) {
    console.warn(`The installed packages were not kept for the next start: ${describeError(err.errno ? `file system error ${err.errno}` : err).message}`);
  }
}

