// The page's Python: a module Web Worker that starts Python (python.js: Pyodide, numpy, the
// decodelab package and the checked lesson files) and then answers the pages it serves. The
// main thread never runs Python.
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

import { INTERRUPTED, clearInterrupt, controlMessage, isFatal, isInterrupt, memoryReport } from "./health.js";
import { runtimeProblem } from "./integrity.js";
import { ModelFileError, forget as forgetModelFile, fromDisk, obtain as obtainModelFile } from "./modelfile.js";
import * as replies from "./replies.js";
import { ASSETS_FS, BOOT_SESSION, afterStart, call, describeError, dropKept, progressNow, python, startPython } from "./python.js";

const BATCH_MS = 12;
const SHARED = typeof SharedWorkerGlobalScope !== "undefined" && self instanceof SharedWorkerGlobalScope;

let booted = null; // {info, timings} once ready; {error} if start-up failed

// --- the pages served ---------------------------------------------------------------------------

const clients = new Set();
let connections = 0;

// One page: how to reach it, its session in Python, its run and its stops.
function makeClient(send, session) {
  return {
    send, session, current: null, next: null, earlyStops: new Set(), restoreAbandoned: false, announced: false, loading: null,
    tasks: new Map(), // request id -> {n, stopped}: its long call going on in slices
  };
}

function broadcast(message) {
  for (const client of clients) client.send(message);
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

// Jobs run one at a time, in arrival order, after boot, with a turn of the event loop between
// them (a waiting "stop" or heartbeat is read there). A run is one job per batch, each queued
// behind what other pages asked meanwhile, so widgets sharing this Python take turns.
const jobs = [];
let pumping = false;
const bootDone = startPython(broadcast).then((started) => {
  booted = started;
  for (const client of clients) announce(client);
  afterStart(booted);
}, (err) => {
  dropKept(); // what this start used may be what broke it: the next start begins afresh
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

// The longest job since the last "job-report" that reset it: what keeps the worker from its
// heartbeat (measured for the benchmark; a job is one slice of any long work).
const longest = { ms: 0, what: null };

async function runJob({ client, message, work, run }) {
  const post = client.send;
  if (!python.ready) {
    post({ type: "error", id: message.id, message: "Python did not start, so this request cannot run." });
    return;
  }
  try {
    clearInterrupt(); // an interrupt meant for a call that has ended must not hit this one
    const began = performance.now();
    await work();
    const ms = performance.now() - began;
    if (ms > longest.ms) Object.assign(longest, { ms: Math.round(ms), what: [message.type, message.endpoint].filter(Boolean).join(" ") });
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
    // a run whose text has ended and whose live check is catching up: the check is given up,
    // so the new run never waits for it (the old run's last batch says how many steps)
    if (client.current.checking) client.current.skipCheck = true;
    client.next = message;
    return;
  }
  const { id, settings = {}, pace_ms: pace } = message;
  const post = client.send;
  const paceMs = Math.min(Math.max(Number(pace) || 0, 0), 2000);
  const reply = call(client.session, "start", settings);
  if (!reply.ok) {
    post(replies.invalid(id, reply));
    return;
  }
  post(replies.started(id, reply));
  const run = { id, stopRequested: client.earlyStops.delete(id) };
  client.current = run;
  for (const old of client.earlyStops) if (old < id) client.earlyStops.delete(old); // stops that came too late
  const batch = () => {
    if (client.current !== run) return; // replaced or failed meanwhile
    // Stop, or a new run asked for, while the check catches up after the text: it is given up
    const skip = run.skipCheck || (run.stopRequested && run.checking);
    const out = run.stopRequested || skip
      ? call(client.session, "cancel", skip ? { skip_check: true } : {})
      : call(client.session, "advance", paceMs > 0 ? { budget_ms: 0, catch_up: true } : { budget_ms: BATCH_MS });
    run.checking = Boolean(out.checking);
    // the batch whole: its steps and what the page draws next (flow, held); the last one
    // ("done") also says how the run ended
    post(replies.batch(id, out));
    if (out.done) {
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

// The real model: its file found in this browser or downloaded, and checked (modelfile.js), or
// a GGUF file the learner opened ({file}: a File, read as it is), outside the queue of jobs, so the page's other requests go on meanwhile; then written into
// Python's file system and read by Python a part per job (webapi pretrained_load_*), so the
// page sees each part and a "stop" is read between two. Progress goes to the page as
// {type: "model-progress", id, phase: "download" | "check" | "read", ...}; the reply says how it
// ended: {ok: true, info, from: "site" | "kept" | "disk", kept, ms} or {ok: false, stopped | problem, message}.
const MODEL_FS = "/tmp/decodelab-model.gguf";
const READ_MS = 60; // a part of the model per job, about this long (a block takes ~50 ms)

// The file in Python's file system (JavaScript memory, not WebAssembly's) while it is read.
function dropModelFile() {
  const fs = python.pyodide && python.pyodide.FS;
  if (fs && fs.analyzePath(MODEL_FS).exists) fs.unlink(MODEL_FS);
}

async function loadModel(client, message) {
  const { id } = message;
  const post = client.send;
  if (client.loading) {
    post({ type: "reply", id, result: { ok: false, problem: "busy", message: "The model is being loaded already." } });
    return;
  }
  const load = { id, abort: new AbortController(), stopped: false };
  client.loading = load;
  const began = performance.now();
  const report = (progress) => post({ type: "model-progress", id, ...progress });
  const finish = (result) => {
    if (client.loading === load) client.loading = null;
    dropModelFile();
    post({ type: "reply", id, result });
  };
  const stopped = () => finish({ ok: false, stopped: true, message: "Stopped: the model was not loaded. Load it again whenever you like." });
  let got;
  try {
    await bootDone;
    if (!python.ready) return finish({ ok: false, problem: "python", message: "Python did not start, so the model cannot be read." });
    got = message.file // a File the learner opened: read as it is, not kept
      ? await fromDisk(message.file)
      : await obtainModelFile(String(message.model), load.abort.signal, report);
  } catch (err) {
    if (load.stopped) return stopped();
    if (err instanceof ModelFileError) return finish({ ok: false, problem: err.kind, message: err.message });
    return finish({ ok: false, problem: "error", message: `The model's file could not be obtained: ${err.message || err}` });
  }
  const readBegan = { at: 0 };
  const guarded = (work) => () => {
    try {
      work();
    } catch (err) { // Python failed (e.g. memory refused): nothing half-read is kept
      if (client.loading === load) client.loading = null;
      dropModelFile();
      try { call(client.session, "pretrained_cancel"); } catch { /* Python itself is gone */ }
      throw err;
    }
  };
  const part = guarded(() => {
    if (load.stopped) {
      call(client.session, "pretrained_cancel");
      return stopped();
    }
    const out = call(client.session, "pretrained_load_advance", { budget_ms: READ_MS });
    if (!out.ok) return finish({ ok: false, problem: "file", message: out.errors[0].message });
    report({ phase: "read", part: out.progress.part, done: out.progress.done, total: out.progress.total });
    if (!out.done) return enqueue(client, message, part);
    const ms = { ...got.ms, read: Math.round(performance.now() - readBegan.at), total: Math.round(performance.now() - began) };
    finish({ ok: true, info: out.result, from: got.from, kept: got.kept, bytes: got.entry.bytes, ms });
  });
  enqueue(client, message, guarded(() => {
    if (load.stopped) return stopped();
    readBegan.at = performance.now();
    python.pyodide.FS.writeFile(MODEL_FS, got.bytes);
    got.bytes = null; // Python reads the file a tensor at a time; it goes when the load ends
    // (a file of one's own goes by its own name: the command line that repeats a run reads it)
    const named = message.file ? { file: message.file.name } : {};
    const out = call(client.session, "pretrained_load_start", { path: MODEL_FS, engine: message.engine, ...named });
    if (!out.ok) return finish({ ok: false, problem: "file", message: out.errors[0].message });
    report({ phase: "read", part: out.progress.part, done: 0, total: out.progress.total });
    enqueue(client, message, part);
  }));
}

// A call that takes seconds (a beam search on the real model, say) answers "pending" after its
// first slice of work (decodelab.core.loops.slices); it goes on a slice per job, each queued behind
// what other pages asked meanwhile, so the worker answers its heartbeat and a "stop" with the
// call's id between two slices. The page hears one reply: the endpoint's own answer, or, after
// a stop, {ok: false, stopped: true} with a sentence.
const SLICE_MS = 40;
const STOPPED = "Stopped before it finished: nothing of it was kept.";

function follow(client, message, reply) {
  const { id } = message;
  if (!(reply && reply.ok && reply.pending)) {
    client.tasks.delete(id);
    client.send({ type: "reply", id, result: reply });
    return;
  }
  const task = client.tasks.get(id) || { n: reply.task, stopped: client.earlyStops.delete(id) };
  task.n = reply.task;
  client.tasks.set(id, task);
  enqueue(client, message, () => {
    if (task.stopped) {
      client.tasks.delete(id);
      call(client.session, "abandon", { task: task.n });
      const errors = [{ field: "request", label: "Request", message: STOPPED }];
      client.send({ type: "reply", id, result: { ok: false, stopped: true, errors } });
      return;
    }
    follow(client, message, call(client.session, "resume", { task: task.n, budget_ms: SLICE_MS }));
  });
}

// What a page can ask, besides the heartbeat and "stop": one call into Python (any endpoint of
// decodelab.entry.webapi; a long one goes on over many jobs, `follow`), the two requests that
// run over many jobs, the memory the worker holds (WebAssembly memory, Python objects), for the
// soak test, and its longest job, for the benchmark.
const HANDLERS = {
  call: (client, m) => follow(client, m, call(client.session, String(m.endpoint), m.request ?? {})),
  generate,
  restore,
  "memory-report": (client, m) => client.send({ type: "reply", id: m.id, result: memoryReport(python.pyodide) }),
  "job-report": (client, m) => {
    client.send({ type: "reply", id: m.id, result: { ...longest } });
    if (m.reset) Object.assign(longest, { ms: 0, what: null });
  },
};
// Requests that are not jobs themselves (they queue their own): loading the real model, whose
// download runs beside the queue; forgetting its kept copy.
const BESIDE = {
  "load-model": loadModel,
  "forget-model": (client, m) => forgetModelFile().then(() => client.send({ type: "reply", id: m.id, result: { ok: true } })),
};

function receive(client, message) {
  const post = client.send;
  if (controlMessage(message, { post, pyodide: () => python.pyodide })) return; // heartbeat, test faults
  if (message.type === "stop" && client.loading && message.id === client.loading.id) {
    client.loading.stopped = true;
    client.loading.abort.abort();
    return;
  }
  if (message.type === "stop" && message.id !== undefined && client.tasks.has(message.id)) {
    client.tasks.get(message.id).stopped = true; // a long call: given up before its next slice
    return;
  }
  if (message.type === "stop") {
    const run = client.current;
    if (run && (message.id === undefined || message.id === run.id)) run.stopRequested = true;
    else if (message.id !== undefined) client.earlyStops.add(message.id);
    return;
  }
  if (message.type === "bye") { // the page is going: its state in Python goes too
    clients.delete(client);
    if (python.ready && client.session !== BOOT_SESSION) python.webapi.forget(client.session);
    if (SHARED && !clients.size) self.close(); // the last page has gone: so does Python
    return;
  }
  if (message.type === "generate") client.restoreAbandoned = true; // the run on screen is replaced
  if (message.type === "restore") client.restoreAbandoned = false; // (a generate after it abandons it)
  if (Object.hasOwn(BESIDE, message.type)) {
    BESIDE[message.type](client, message);
    return;
  }
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
  else if (progressNow()) send(progressNow());
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
