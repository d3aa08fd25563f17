// The page's Python: a module Web Worker that boots Pyodide, loads numpy and the decodelab
// package, copies the checked lesson data into Pyodide's file system, and then answers
// requests from the page. The main thread never runs Python.
//
// Every message in either direction is a plain object holding only strings, numbers,
// booleans, arrays and plain objects (Python results cross as JSON text and are parsed here),
// so nothing Python-owned ever reaches postMessage.
//
// Python is reached through one function, webapi.call(endpoint, request), JSON text both ways.
// Generation runs in short time-boxed batches (the "advance" endpoint, BATCH_MS each), with a
// real trip through the event loop between batches, so that a "stop" message is read while a
// run is going.

import { INTERRUPTED, clearInterrupt, controlMessage, isFatal, isInterrupt, memoryReport, useInterruptBuffer, watchFatal } from "./health.js";
import { guardRuntime, runtimeProblem } from "./integrity.js";
import { createDownloads, megabytes } from "./downloads.js";

const BATCH_MS = 12;
const PYODIDE_DIR = new URL("./pyodide/", import.meta.url).href;
const ASSETS_URL = new URL("./assets/", import.meta.url);
const ASSETS_FS = "/assets";
const SESSION = "page"; // this worker serves one page: its state in Python is this session

let pyodide = null;
let webapi = null; // the decodelab.webapi module (a PyProxy kept for the worker's lifetime)
let current = null; // {id, stopRequested} of the generation in progress
let ready = false; // true once boot has finished without error
const earlyStops = new Set(); // ids of runs stopped before they began
let bootStart = 0;

// --- messages out ---------------------------------------------------------------------------

function post(message) {
  self.postMessage(message);
}

let shown = { phase: "runtime", label: "", fraction: 0 }; // the start's latest progress

function progress(phase, label, fraction) {
  shown = { phase, label, fraction: Math.max(fraction, shown.fraction) };
  post({ type: "progress", ...shown, ms: Math.round(performance.now() - bootStart) });
}

// While the runtime, numpy, the package and the lesson files download, the phase's words say how
// much has come, and the bar follows the bytes up to where the package phase starts.
const DOWNLOAD_BAR = [0.02, 0.75];
const downloads = createDownloads(({ got, total, done }) => {
  if (!total || ready) return;
  const label = shown.label.replace(/ [\d.]+ of [\d.]+ MB$/, "");
  const bytes = done ? "" : ` ${megabytes(got)} of ${megabytes(total)} MB`;
  const fraction = DOWNLOAD_BAR[0] + (DOWNLOAD_BAR[1] - DOWNLOAD_BAR[0]) * Math.min(1, got / total);
  progress(shown.phase, label + bytes, fraction);
});

// A Python exception's message is its whole traceback; its last line says what went wrong.
function describeError(err) {
  const text = String((err && err.message) || err || "unknown error").trim();
  const lines = text.split("\n").map((s) => s.trim()).filter(Boolean);
  return { message: lines.length ? lines[lines.length - 1] : text, detail: text };
}

// --- a zero-delay yield --------------------------------------------------------------------
// A message through our own channel is queued behind messages already waiting for the worker
// (such as "stop"), so awaiting it lets them run; setTimeout(0) would be clamped to 4 ms.

const channel = new MessageChannel();
const waiting = [];
channel.port1.onmessage = () => {
  const resume = waiting.shift();
  if (resume) resume();
};

function yieldToEventLoop() {
  return new Promise((resolve) => {
    waiting.push(resolve);
    channel.port2.postMessage(0);
  });
}

// --- boot ---------------------------------------------------------------------------------

async function sha256Hex(buffer) {
  const digest = await crypto.subtle.digest("SHA-256", buffer);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

function mkdirTree(path) {
  const dir = path.slice(0, path.lastIndexOf("/"));
  if (dir) pyodide.FS.mkdirTree(dir);
}

async function loadPythonPackage(name) {
  const problems = [];
  const notes = [];
  await pyodide.loadPackage([name], {
    messageCallback: (msg) => notes.push(String(msg)),
    errorCallback: (msg) => problems.push(String(msg)),
  });
  // loadPackage reports a failed download, a hash mismatch or an unknown name only through
  // these callbacks, so check that the package really arrived.
  if (!(name in pyodide.loadedPackages)) {
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
  let finished = 0;
  await Promise.all(files.map(async (file) => {
    if (typeof file.path !== "string" || file.path.includes("..") || file.path.startsWith("/")) {
      throw new Error(`The lesson file list names an unsafe path: ${JSON.stringify(file.path)}.`);
    }
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
    pyodide.FS.writeFile(target, new Uint8Array(buffer));
    finished += 1;
    progress("assets", `Checking the models and text (${finished} of ${files.length})…`, 0.85 + 0.15 * (finished / files.length));
  }));
}

async function boot() {
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
    ({ loadPyodide } = await import("./pyodide/pyodide.mjs"));
  } catch (err) {
    throw new Error(`The Python runtime (pyodide/pyodide.mjs) could not be loaded: ${err.message || err}.`);
  }
  pyodide = await Promise.race([guard.failed, loadPyodide({ indexURL: PYODIDE_DIR, lockFileURL: PYODIDE_DIR + "pyodide-lock.json" })]);
  watchFatal(pyodide, post); // Python unusable from now on (out of memory): the page restarts us
  useInterruptBuffer(pyodide); // where the page is cross-origin isolated (supervisor.js)
  lap("runtime_ms");

  progress("numpy", "Loading numpy…", 0.55);
  await loadPythonPackage("numpy");
  try {
    pyodide.pyimport("numpy").destroy();
  } catch (err) {
    throw new Error(`numpy was downloaded but cannot be imported: ${describeError(err).message}`);
  }
  lap("numpy_ms");

  progress("decodelab", "Loading the decodelab package…", 0.75);
  await loadPythonPackage("decodelab");
  try {
    webapi = pyodide.pyimport("decodelab.webapi");
  } catch (err) {
    throw new Error(`The decodelab package was downloaded but cannot be imported: ${describeError(err).message}`);
  }
  lap("decodelab_ms");

  progress("assets", "Checking the models and text…", 0.85);
  await loadAssets();
  let info;
  try {
    info = call("setup", { assets: ASSETS_FS });
  } catch (err) {
    throw new Error(`The models could not be set up: ${describeError(err).message}`);
  }
  if (!info.ok) throw new Error(`The models could not be set up: ${info.errors.map((e) => e.message).join(" ")}`);
  lap("assets_ms");

  // One short run of each model before the page opens (webapi.warm_up says why): the first run
  // the learner starts is then as smooth as every later one. Only an optimisation: if it fails,
  // the page opens all the same, and a real run reports whatever is wrong next to its fields.
  progress("warmup", "Warming up the models…", 0.97);
  try {
    call("warm_up");
  } catch (err) {
    console.warn(`The warm-up run failed: ${describeError(err).detail}`);
  }
  lap("warmup_ms");
  timings.total_ms = Math.round(performance.now() - bootStart);

  ready = true;
  progress("ready", "Ready.", 1);
  post({ type: "ready", info, timings });
}

// --- requests -----------------------------------------------------------------------------

// The one way into Python: an endpoint of decodelab.webapi by name, a plain object in, a plain
// object out ({ok: true, ...} or {ok: false, errors: [{field, label, message}]}).
function call(endpoint, request = {}) {
  return JSON.parse(webapi.call(endpoint, JSON.stringify(request), SESSION));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// paceMs > 0 is slow motion: one step per batch (a budget of 0 ms still runs one step), then
// a pause, so the page can show each step as it happens.
async function generate({ id, settings = {}, pace_ms: pace }) {
  const paceMs = Math.min(Math.max(Number(pace) || 0, 0), 2000);
  const started = call("start", settings);
  if (!started.ok) {
    post({ type: "invalid", id, errors: started.errors });
    return;
  }
  post({ type: "started", id, settings: started.settings, prompt_tokens: started.prompt_tokens, healed: started.healed });
  current = { id, stopRequested: earlyStops.delete(id) };
  for (const old of earlyStops) if (old < id) earlyStops.delete(old); // stops that came too late
  try {
    for (;;) {
      const out = current.stopRequested ? call("cancel") : call("advance", { budget_ms: paceMs > 0 ? 0 : BATCH_MS });
      if (out.steps.length || !current.stopRequested) post({ type: "steps", id, steps: out.steps });
      if (out.done) {
        post({ type: "done", id, finish_reason: out.finish_reason, stop_reason: out.stop_reason, text: out.text, cut: out.cut, json: out.json });
        return;
      }
      if (paceMs > 0) await sleep(paceMs);
      else await yieldToEventLoop(); // a waiting "stop" is handled here
    }
  } finally {
    current = null;
  }
}

// After a restart: make the run on screen again (webapi restore_start), in batches so that the
// worker keeps answering the page; given up as soon as the learner starts a new run, which
// replaces the one on screen anyway.
let restoreAbandoned = false;

async function restore({ id, settings = {}, steps }) {
  restoreAbandoned = false;
  let out = call("restore_start", { settings, steps });
  while (out.ok && !out.done) {
    await yieldToEventLoop(); // a heartbeat, or a new run that makes this moot, gets its turn
    if (restoreAbandoned) {
      out = { ok: false, abandoned: true };
      break;
    }
    out = call("restore_advance", { budget_ms: BATCH_MS });
  }
  post({ type: "reply", id, result: out });
}

// What the page can ask, besides the heartbeat and "stop": one call into Python (any endpoint
// of decodelab.webapi), the two requests that run over many turns of the event loop, and the
// memory the worker holds (WebAssembly memory, Python objects), for the soak test.
const HANDLERS = {
  call: (m) => post({ type: "reply", id: m.id, result: call(String(m.endpoint), m.request ?? {}) }),
  generate,
  restore,
  "memory-report": (m) => post({ type: "reply", id: m.id, result: memoryReport(pyodide) }),
};

// Requests run one at a time, in arrival order, after boot. "stop" skips the queue: it only
// raises a flag that the running generation reads between batches.
let queue = boot().catch((err) => {
  const text = runtimeProblem() || String((err && err.message) || err);
  console.error(text);
  post({ type: "boot-error", message: text.includes("Traceback") ? describeError(err).message : text });
});

self.onmessage = (event) => {
  const message = event.data || {};
  if (controlMessage(message, { post, pyodide: () => pyodide })) return; // heartbeat, test faults
  if (message.type === "stop") {
    if (current && (message.id === undefined || message.id === current.id)) current.stopRequested = true;
    else if (message.id !== undefined) earlyStops.add(message.id);
    return;
  }
  if (message.type === "generate") restoreAbandoned = true; // the run on screen is replaced
  const handler = Object.hasOwn(HANDLERS, message.type) ? HANDLERS[message.type] : null;
  if (!handler) {
    post({ type: "error", id: message.id, message: `Unknown request type ${JSON.stringify(message.type)}.` });
    return;
  }
  queue = queue.then(async () => {
    if (!ready) {
      post({ type: "error", id: message.id, message: "Python did not start, so this request cannot run." });
      return;
    }
    try {
      clearInterrupt(); // an interrupt meant for a call that has ended must not hit this one
      await handler(message);
    } catch (err) {
      if (isFatal(err)) { // Python cannot be used again: the page starts a new worker
        post({ type: "fatal", id: message.id, message: describeError(err).message });
        self.close();
        return;
      }
      if (isInterrupt(err)) { // the page interrupted a call that stopped answering
        post({ type: "interrupted" });
        post({ type: "error", id: message.id, message: INTERRUPTED });
        return;
      }
      // An unexpected Python exception: report it and keep serving.
      const { message: text, detail } = describeError(err);
      console.error(detail);
      post({ type: "error", id: message.id, message: text });
    }
  });
};
