// The page's Python: a module Web Worker that boots Pyodide, loads numpy and the decodelab
// package, copies the checked lesson data into Pyodide's file system, and then answers
// requests from the page. The main thread never runs Python.
//
// Every message in either direction is a plain object holding only strings, numbers,
// booleans, arrays and plain objects (Python results cross as JSON text and are parsed here),
// so nothing Python-owned ever reaches postMessage.
//
// Python is reached through one function, webapi.call(endpoint, request, session), JSON text
// both ways. Generation runs in short time-boxed batches (the "advance" endpoint, BATCH_MS each),
// each a job of its own, with a real trip through the event loop between jobs, so that a "stop"
// message is read while a run is going.
//
// The same file runs as a dedicated worker (one page) or as a SharedWorker: then every widget of
// the site on a course page connects to one Python, each with its own session in webapi (its
// run, its Stop, its own trained text), and their jobs take turns, batch by batch.

import { INTERRUPTED, clearInterrupt, controlMessage, isFatal, isInterrupt, memoryReport, useInterruptBuffer, watchFatal } from "./health.js";
import { guardRuntime, runtimeProblem, sha256Hex } from "./integrity.js";
import { createDownloads, megabytes } from "./downloads.js";
import { packBytecode, settleSources, unpackBytecode, useBytecodeDir } from "./bytecode.js";
import { drop, findKept, keep } from "./kept.js";
import { packInstalled, restoreInstalled } from "./installed.js";
import { SNAPSHOT_MODULES, importedSinceSnapshot, looksLikeSnapshot, prepareForSnapshot } from "./snapshot.js";

const BATCH_MS = 12;
const PYODIDE_DIR = new URL("../pyodide/", import.meta.url).href;
const ASSETS_URL = new URL("../assets/", import.meta.url);
const ASSETS_FS = "/assets";
const SHARED = typeof SharedWorkerGlobalScope !== "undefined" && self instanceof SharedWorkerGlobalScope;
const BOOT_SESSION = "page"; // the session start-up sets up (a dedicated worker's only one)

let pyodide = null;
let webapi = null; // the decodelab.entry.webapi module (a PyProxy kept for the worker's lifetime)
let ready = false; // true once boot has finished without error
let booted = null; // {info, timings} once ready; {error} if start-up failed
let bootStart = 0;
let snapshot = null; // the runtime's memory snapshot (kept.js) this start found
let bytecode = null; // the kept bytecode of numpy and the package (bytecode.js)
let installed = null; // numpy and the package as installed (installed.js)

// --- the pages served ---------------------------------------------------------------------------

const clients = new Set();
let connections = 0;

// One page: how to reach it, its session in Python, its run and its stops.
function makeClient(send, session) {
  return { send, session, current: null, next: null, earlyStops: new Set(), restoreAbandoned: false, announced: false };
}

function broadcast(message) {
  for (const client of clients) client.send(message);
}

let shown = { phase: "runtime", label: "", fraction: 0 }; // the start's latest progress

function progress(phase, label, fraction) {
  shown = { phase, label, fraction: Math.max(fraction, shown.fraction) };
  broadcast({ type: "progress", ...shown, ms: Math.round(performance.now() - bootStart) });
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
  pyodide = await startRuntime(loadPyodide, guard, timings);
  timings.bytecode = bytecode.state === "kept" ? "kept" : "none";
  if (bytecode.state !== "off") useBytecodeDir(pyodide);
  if (bytecode.bytes) {
    try {
      unpackBytecode(pyodide, bytecode.bytes);
    } catch (err) {
      console.warn(`The kept bytecode is not used: ${err.message}`);
      timings.bytecode = "none";
      drop(bytecode);
      bytecode = { ...bytecode, bytes: null, state: "none" };
    }
  }
  watchFatal(pyodide, broadcast); // Python unusable from now on (out of memory): the pages restart us
  useInterruptBuffer(pyodide); // where the page is cross-origin isolated (supervisor.js)
  lap("runtime_ms");

  progress("numpy", "Loading numpy…", 0.55);
  timings.installed = "none";
  if (installed.bytes) {
    try {
      restoreInstalled(pyodide, installed.bytes, BYTECODE_PACKAGES);
      timings.installed = "kept";
    } catch (err) {
      console.warn(`The kept installed packages are not used: ${describeError(err).message}`);
      downloads.unskip();
      drop(installed);
      installed = { ...installed, bytes: null, state: "none" };
    }
  }
  if (timings.installed !== "kept") await loadPythonPackage("numpy");
  if (bytecode.state !== "off") settleSources(pyodide, "numpy");
  try {
    pyodide.pyimport("numpy").destroy();
  } catch (err) {
    throw new Error(`numpy was downloaded but cannot be imported: ${describeError(err).message}`);
  }
  lap("numpy_ms");

  progress("decodelab", "Loading the decodelab package…", 0.75);
  if (timings.installed !== "kept") await loadPythonPackage("decodelab");
  if (bytecode.state !== "off") settleSources(pyodide, "decodelab");
  try {
    webapi = pyodide.pyimport("decodelab.entry.webapi");
  } catch (err) {
    throw new Error(`The decodelab package was downloaded but cannot be imported: ${describeError(err).message}`);
  }
  lap("decodelab_ms");

  progress("assets", "Checking the models and text…", 0.85);
  await loadAssets();
  let info;
  try {
    info = call(BOOT_SESSION, "setup", { assets: ASSETS_FS });
  } catch (err) {
    throw new Error(`The models could not be set up: ${describeError(err).message}`);
  }
  if (!info.ok) throw new Error(`The models could not be set up: ${info.errors.map((e) => e.message).join(" ")}`);
  lap("assets_ms");

  timings.total_ms = Math.round(performance.now() - bootStart);
  timings.imported_after_snapshot = importedSinceSnapshot(pyodide);

  ready = true;
  progress("ready", "Ready.", 1);
  booted = { info, timings };
  for (const client of clients) announce(client);
  // The pages' requests wait for these (they queue behind the start, bootDone).
  warmUp();
  if (bytecode.state === "none") keepBytecode();
  if (installed.state === "none") keepInstalled();
}

// One short run of each model as soon as the page has opened, while the learner reads
// (webapi.warm_up says why): the first run the learner starts is then as smooth as every later
// one, and a run asked for meanwhile waits a few tenths of a second at most. Only an
// optimisation: if it fails, a real run reports whatever is wrong next to its fields.
function warmUp() {
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
function keepBytecode() {
  try {
    const t0 = performance.now();
    const { pack, files } = packBytecode(pyodide);
    if (files) keep(bytecode, pack);
    booted.timings.bytecode_pack = { files, bytes: pack.byteLength, ms: Math.round(performance.now() - t0) };
  } catch (err) {
    console.warn(`The bytecode was not kept for the next start: ${describeError(err.errno ? `file system error ${err.errno}` : err).message}`);
  }
}

// After a start that found no kept installed packages: keep them as installed (installed.js).
function keepInstalled() {
  try {
    const { pack, files } = packInstalled(pyodide, BYTECODE_PACKAGES);
    if (files) keep(installed, pack);
  } catch (err) {
    console.warn(`The installed packages were not kept for the next start: ${describeError(err.errno ? `file system error ${err.errno}` : err).message}`);
  }
}

// A page is told Python is ready once its session is set up (sharing the loaded models).
function announce(client) {
  if (client.announced || !booted || !booted.info) return;
  client.announced = true;
  let info = booted.info;
  if (client.session !== BOOT_SESSION) {
    try {
      info = call(client.session, "setup", { assets: ASSETS_FS });
    } catch (err) {
      client.send({ type: "boot-error", message: `The models could not be set up: ${describeError(err).message}` });
      return;
    }
  }
  const joined = !client.first; // another page's start-up brought Python up
  client.send({ type: "ready", info, timings: { ...booted.timings, shared: SHARED, joined, pages: clients.size } });
}

// --- requests -----------------------------------------------------------------------------

// The one way into Python: an endpoint of decodelab.entry.webapi by name, a plain object in, a plain
// object out ({ok: true, ...} or {ok: false, errors: [{field, label, message}]}).
function call(session, endpoint, request = {}) {
  return JSON.parse(webapi.call(endpoint, JSON.stringify(request), session));
}

// Jobs run one at a time, in arrival order, after boot, with a turn of the event loop between
// them (a waiting "stop" or heartbeat is read there). A run is one job per batch, each queued
// behind what other pages asked meanwhile, so widgets sharing this Python take turns.
const jobs = [];
let pumping = false;
const bootDone = boot().catch((err) => {
  // What this start used may be what broke it: the next start begins afresh.
  if (snapshot && snapshot.bytes) drop(snapshot);
  if (bytecode && bytecode.bytes) drop(bytecode);
  if (installed && installed.bytes) drop(installed);
  const text = runtimeProblem() || String((err && err.message) || err);
  console.error(text);
  booted = { error: text.includes("Traceback") ? describeError(err).message : text };
  broadcast({ type: "boot-error", message: booted.error });
});

function enqueue(client, message, work, run = null) {
  jobs.push({ client, message, work, run });
  if (!pumping) pump();
}

async function pump() {
  pumping = true;
  await bootDone;
  while (jobs.length) {
    const job = jobs.shift();
    if (clients.has(job.client)) await runJob(job);
    else if (job.message.id !== undefined) job.client.send({ type: "error", id: job.message.id, message: "This page said it was leaving, so its request was not run." });
    await yieldToEventLoop();
  }
  pumping = false;
}

async function runJob({ client, message, work, run }) {
  const post = client.send;
  if (!ready) {
    post({ type: "error", id: message.id, message: "Python did not start, so this request cannot run." });
    return;
  }
  try {
    clearInterrupt(); // an interrupt meant for a call that has ended must not hit this one
    await work();
  } catch (err) {
    if (run && client.current === run) finishRun(client); // only a batch's failure ends its run
    if (isFatal(err)) { // Python cannot be used again: every page starts a worker of its own
      broadcast({ type: "fatal", id: message.id, message: describeError(err).message });
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
}

// A run has ended (done, stopped or failed): a run the page asked for meanwhile starts now.
function finishRun(client) {
  client.current = null;
  const next = client.next;
  client.next = null;
  if (next) enqueue(client, next, () => generate(client, next));
}

// A run: started in one job, then one job per batch, each queued behind whatever other pages
// asked meanwhile. paceMs > 0 is slow motion: one step per batch (a budget of 0 ms still runs
// one step), then a pause, so the page can show each step as it happens.
function generate(client, message) {
  if (client.current) { // this page's previous run goes first (its Stop is already on its way)
    client.next = message;
    return;
  }
  const { id, settings = {}, pace_ms: pace } = message;
  const post = client.send;
  const paceMs = Math.min(Math.max(Number(pace) || 0, 0), 2000);
  const started = call(client.session, "start", settings);
  if (!started.ok) {
    post({ type: "invalid", id, errors: started.errors });
    return;
  }
  post({ type: "started", id, settings: started.settings, prompt_tokens: started.prompt_tokens, healed: started.healed, greedy: started.greedy, vocab_size: started.vocab_size });
  const run = { id, stopRequested: client.earlyStops.delete(id) };
  client.current = run;
  for (const old of client.earlyStops) if (old < id) client.earlyStops.delete(old); // stops that came too late
  const batch = () => {
    if (client.current !== run) return; // replaced or failed meanwhile
    const out = run.stopRequested ? call(client.session, "cancel") : call(client.session, "advance", { budget_ms: paceMs > 0 ? 0 : BATCH_MS });
    // what the page draws next comes with the steps (flow, held); the end brings the rest
    const sent = out.steps.length || !run.stopRequested;
    if (sent) post({ type: "steps", id, steps: out.steps, flow: out.flow, held: out.held });
    if (out.done) {
      post({ type: "done", id, finish_reason: out.finish_reason, stop_reason: out.stop_reason, text: out.text, flow: sent ? [] : out.flow, cut: out.cut, json: out.json });
      finishRun(client);
      return;
    }
    if (paceMs > 0) setTimeout(() => enqueue(client, message, batch, run), paceMs);
    else enqueue(client, message, batch, run);
  };
  batch();
}

// After a restart: make the run on screen again (webapi restore_start), in batches so that the
// worker keeps answering the page; given up as soon as the learner starts a new run, which
// replaces the one on screen anyway.
function restore(client, { id, settings = {}, steps }) {
  const finish = (out) => client.send({ type: "reply", id, result: out });
  let out = call(client.session, "restore_start", { settings, steps });
  const more = () => {
    if (client.restoreAbandoned) return finish({ ok: false, abandoned: true });
    out = call(client.session, "restore_advance", { budget_ms: BATCH_MS });
    if (out.ok && !out.done) enqueue(client, { id }, more);
    else finish(out);
  };
  if (out.ok && !out.done) enqueue(client, { id }, more);
  else finish(out);
}

// What a page can ask, besides the heartbeat and "stop": one call into Python (any endpoint of
// decodelab.entry.webapi), the two requests that run over many jobs, and the memory the worker holds
// (WebAssembly memory, Python objects), for the soak test.
const HANDLERS = {
  call: (client, m) => client.send({ type: "reply", id: m.id, result: call(client.session, String(m.endpoint), m.request ?? {}) }),
  generate,
  restore,
  "memory-report": (client, m) => client.send({ type: "reply", id: m.id, result: memoryReport(pyodide) }),
};

function receive(client, message) {
  const post = client.send;
  if (controlMessage(message, { post, pyodide: () => pyodide })) return; // heartbeat, test faults
  if (message.type === "stop") {
    const run = client.current;
    if (run && (message.id === undefined || message.id === run.id)) run.stopRequested = true;
    else if (message.id !== undefined) client.earlyStops.add(message.id);
    return;
  }
  if (message.type === "bye") { // the page is going: its state in Python goes too
    clients.delete(client);
    if (ready && client.session !== BOOT_SESSION) webapi.forget(client.session);
    if (SHARED && !clients.size) self.close(); // the last page has gone: so does Python
    return;
  }
  if (message.type === "generate") client.restoreAbandoned = true; // the run on screen is replaced
  if (message.type === "restore") client.restoreAbandoned = false; // (a generate after it abandons it)
  const handler = Object.hasOwn(HANDLERS, message.type) ? HANDLERS[message.type] : null;
  if (!handler) {
    post({ type: "error", id: message.id, message: `Unknown request type ${JSON.stringify(message.type)}.` });
    return;
  }
  enqueue(client, message, () => handler(client, message));
}

// A new page: it sees the start-up's progress so far, and hears "ready" once its session is set up.
function connect(send, session) {
  const client = makeClient(send, session);
  client.first = connections <= 1;
  clients.add(client);
  if (booted && booted.error) send({ type: "boot-error", message: booted.error });
  else if (booted) enqueue(client, {}, () => announce(client));
  else if (shown.label) send({ type: "progress", ...shown, ms: Math.round(performance.now() - bootStart) });
  return client;
}

if (SHARED) {
  self.onconnect = (event) => {
    const port = event.ports[0];
    connections += 1;
    const client = connect((m) => port.postMessage(m), `widget-${connections}`);
    port.onmessage = (e) => receive(client, e.data || {});
  };
} else {
  connections = 1;
  const client = connect((m) => self.postMessage(m), BOOT_SESSION);
  self.onmessage = (event) => receive(client, event.data || {});
}
