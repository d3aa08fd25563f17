// The page's Python: a module Web Worker that boots Pyodide, loads numpy and the decodelab
// package, copies the checked lesson data into Pyodide's file system, and then answers
// requests from the page. The main thread never runs Python.
//
// Every message in either direction is a plain object holding only strings, numbers,
// booleans, arrays and plain objects (Python results cross as JSON text and are parsed here),
// so nothing Python-owned ever reaches postMessage.
//
// Generation runs in short time-boxed batches (`advance(BATCH_MS)`), with a real trip through
// the event loop between batches, so that a "stop" message is read while a run is going.

import { INTERRUPTED, clearInterrupt, controlMessage, isFatal, isInterrupt, memoryReport, useInterruptBuffer, watchFatal } from "./health.js";
import { guardRuntime, runtimeProblem } from "./integrity.js";

const BATCH_MS = 12;
const PYODIDE_DIR = new URL("./pyodide/", import.meta.url).href;
const ASSETS_URL = new URL("./assets/", import.meta.url);
const ASSETS_FS = "/assets";

let pyodide = null;
let api = null; // the decodelab.webapi module (a PyProxy kept for the worker's lifetime)
let current = null; // {id, stopRequested} of the generation in progress
let ready = false; // true once boot has finished without error
const earlyStops = new Set(); // ids of runs stopped before they began
let bootStart = 0;

// --- messages out ---------------------------------------------------------------------------

function post(message) {
  self.postMessage(message);
}

function progress(phase, label, fraction) {
  post({ type: "progress", phase, label, fraction, ms: Math.round(performance.now() - bootStart) });
}

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
  let finished = 0;
  await Promise.all(files.map(async (file) => {
    if (typeof file.path !== "string" || file.path.includes("..") || file.path.startsWith("/")) {
      throw new Error(`The lesson file list names an unsafe path: ${JSON.stringify(file.path)}.`);
    }
    const response = await fetchChecked(new URL(file.path, ASSETS_URL), `the lesson file ${file.path}`);
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
  const guard = await guardRuntime(PYODIDE_DIR); // every runtime file is hash-checked before it runs
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
    api = pyodide.pyimport("decodelab.webapi");
  } catch (err) {
    throw new Error(`The decodelab package was downloaded but cannot be imported: ${describeError(err).message}`);
  }
  lap("decodelab_ms");

  progress("assets", "Checking the models and text…", 0.85);
  await loadAssets();
  let info;
  try {
    info = JSON.parse(api.setup(ASSETS_FS));
  } catch (err) {
    throw new Error(`The models could not be set up: ${describeError(err).message}`);
  }
  lap("assets_ms");

  // One short run of each model before the page opens (webapi.warm_up says why): the first run
  // the learner starts is then as smooth as every later one. Only an optimisation: if it fails,
  // the page opens all the same, and a real run reports whatever is wrong next to its fields.
  progress("warmup", "Warming up the models…", 0.97);
  try {
    api.warm_up();
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

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// paceMs > 0 is slow motion: one step per batch (a budget of 0 ms still runs one step), then
// a pause, so the page can show each step as it happens.
async function generate(id, settings, paceMs) {
  const started = JSON.parse(api.start(JSON.stringify(settings)));
  if (!started.ok) {
    post({ type: "invalid", id, errors: started.errors });
    return;
  }
  post({ type: "started", id, settings: started.settings });
  current = { id, stopRequested: earlyStops.delete(id) };
  for (const old of earlyStops) if (old < id) earlyStops.delete(old); // stops that came too late
  try {
    for (;;) {
      if (current.stopRequested) {
        const out = JSON.parse(api.cancel());
        if (out.steps && out.steps.length) post({ type: "steps", id, steps: out.steps });
        post({ type: "done", id, finish_reason: out.finish_reason, stop_reason: out.stop_reason, text: out.text });
        return;
      }
      const out = JSON.parse(api.advance(paceMs > 0 ? 0 : BATCH_MS));
      post({ type: "steps", id, steps: out.steps || [] });
      if (out.done) {
        post({ type: "done", id, finish_reason: out.finish_reason, stop_reason: out.stop_reason, text: out.text });
        return;
      }
      if (paceMs > 0) await sleep(paceMs);
      else await yieldToEventLoop(); // a waiting "stop" is handled here
    }
  } finally {
    current = null;
  }
}

// After a restart: make the run on screen again (webapi.restore_start), in batches so that the
// worker keeps answering the page; given up as soon as the learner starts a new run, which
// replaces the one on screen anyway.
let restoreAbandoned = false;

async function restore(id, settings, steps) {
  restoreAbandoned = false;
  const started = JSON.parse(api.restore_start(JSON.stringify({ settings, steps })));
  if (!started.ok) {
    post({ type: "restore", id, result: started });
    return;
  }
  for (;;) {
    if (restoreAbandoned) {
      post({ type: "restore", id, result: { ok: false, abandoned: true } });
      return;
    }
    const out = JSON.parse(api.restore_advance(BATCH_MS));
    if (out.done || !out.ok) {
      post({ type: "restore", id, result: out });
      return;
    }
    await yieldToEventLoop(); // a heartbeat, or a new run that makes this moot, gets its turn
  }
}

function train(id, text) {
  const result = JSON.parse(api.train_custom(String(text)));
  if (!result.ok) {
    post({ type: "invalid", id, errors: result.errors });
    return;
  }
  post({ type: "trained", id, dataset: result.dataset });
}

const handlers = {
  generate: (m) => generate(m.id, m.settings || {}, Math.min(Math.max(Number(m.pace_ms) || 0, 0), 2000)),
  trace: (m) => post({ type: "trace", id: m.id, json: api.trace() }),
  // After a restart: make the run on screen again, quietly, so its trace and lesson work.
  restore: (m) => restore(m.id, m.settings || {}, m.steps),
  train: (m) => train(m.id, m.text),
  probs: (m) => post({ type: "probs", id: m.id, result: JSON.parse(api.probs(JSON.stringify(m.request || {}))) }),
  // The benchmark: one whole run timed inside Python, the same function the native side times.
  bench: (m) => post({ type: "bench", id: m.id, result: JSON.parse(api.bench(JSON.stringify(m.settings || {}))) }),
  // The lesson: one step of the latest run taken apart, the same for typed numbers, and the
  // temperature experiment, run a batch of samples per request so other requests get a turn.
  explain: (m) => post({ type: "explain", id: m.id, result: JSON.parse(api.explain_step(JSON.stringify(m.request || {}))) }),
  "explain-values": (m) => post({ type: "explain-values", id: m.id, result: JSON.parse(api.explain_values(JSON.stringify(m.request || {}))) }),
  "experiment-start": (m) => post({ type: "experiment-start", id: m.id, result: JSON.parse(api.experiment_start(JSON.stringify(m.request || {}))) }),
  "experiment-advance": (m) => post({ type: "experiment-advance", id: m.id, result: JSON.parse(api.experiment_advance(Math.min(Math.max(Number(m.budget_ms) || 0, 0), 500))) }),
  // The KV cache: the batch view, break it on purpose, the memory calculator, the measured cost
  // per step, both models side by side, and the benchmark's transformer rows.
  "kv-batch": (m) => post({ type: "kv-batch", id: m.id, result: JSON.parse(api.batch_view(JSON.stringify(m.request || {}))) }),
  "kv-break": (m) => post({ type: "kv-break", id: m.id, result: JSON.parse(api.break_it(JSON.stringify(m.request || {}))) }),
  "kv-memory": (m) => post({ type: "kv-memory", id: m.id, result: JSON.parse(api.memory(JSON.stringify(m.request || {}))) }),
  "kv-costs": (m) => post({ type: "kv-costs", id: m.id, result: JSON.parse(api.cost_sweep(JSON.stringify(m.request || {}))) }),
  "kv-compare": (m) => post({ type: "kv-compare", id: m.id, result: JSON.parse(api.compare(JSON.stringify(m.settings || {}))) }),
  "kv-bench": (m) => post({ type: "kv-bench", id: m.id, result: JSON.parse(api.bench_generation(JSON.stringify(m.request || {}))) }),
  // Memory held by the worker (WebAssembly memory, Python objects), for the soak test.
  "memory-report": (m) => post({ type: "memory-report", id: m.id, result: memoryReport(pyodide) }),
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
  const handler = handlers[message.type];
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
