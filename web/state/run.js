// A run of the workbench, from Generate to its end: the settings checked by Python, the run asked
// of the worker, its batches of steps taken into the store, Stop, and what happens to the run on
// screen when the worker is lost and replaced. Views draw the run from the store's announcements;
// this module never touches the document.
//
// Besides the store's run events it announces, for the modules that speak for the page (the
// screen reader, an embedding host, the address):
//   asked   {settings}   a run was asked of Python (Generate passed the checks)
//   result  {result}     what that run came to: done, invalid or error (hooks.lastRun's value)
//   worker  {what, ...}  the worker was lost, restarted, interrupted, or could not be restarted

import { TROUBLE } from "../runtime/client.js";

const SLOW_MS = 140; // pause after each step in slow motion

export function createRuns(store, client) {
  const emit = (change) => store.announce(change);
  let pending = null; // the run asked for, not started yet: {id, resolve, settings}
  let lastRun = null; // a Promise of the latest run's result
  let starting = false; // Generate pressed, Python still checking the settings
  let stopped = false; // Stop pressed meanwhile

  function deferred() {
    let resolve;
    const promise = new Promise((r) => { resolve = r; });
    return { promise, resolve };
  }

  /** Send settings to Python (which checks them again) and start a run. */
  function start(settings, { slow = false, done = null, show = false } = {}) {
    const id = client.id();
    const { promise, resolve } = done || deferred();
    lastRun = promise;
    pending = { id, resolve, settings, show };
    store.setPhase("generating");
    client.post({ type: "generate", id, settings, pace_ms: slow ? SLOW_MS : 0 });
    emit({ type: "asked", settings });
    promise.then((result) => emit({ type: "result", result }));
    return promise;
  }

  // Python's reply that came in a message, less the message's own type and the names given
  function reply(m, ...leave) {
    const out = { ...m };
    for (const name of ["type", "ok", ...leave]) delete out[name];
    return out;
  }

  client.on("started", (m) => {
    if (!pending || pending.id !== m.id) return;
    const asked = pending;
    pending = null;
    // a run asked with settings the form did not hold (window.decodelab.generate): the form
    // shows the settings that ran, as Python completed them
    if (asked.show && m.settings) store.apply(m.settings, { locks: false, fit: false });
    store.runStarted({
      // start's reply as Python wrote it: the settings as it completed them, prompt_tokens,
      // healed, greedy (greedy, or temperature 0), vocab_size, ...
      ...reply(m),
      settings: m.settings || asked.settings,
      resolve: asked.resolve,
      steps: [],
      shown: [], // step -> how many of its characters are in the text
      held: [], // [[step, text], ...] held back for a possible stop string
      selected: null,
      follow: true,
      done: false,
      finish: null,
      startedAt: performance.now(),
    });
  });

  client.on("steps", (m) => {
    const run = store.state.run;
    if (!run || run.id !== m.id) return;
    store.runSteps(run, m);
  });

  client.on("done", (m) => {
    const run = store.state.run;
    if (!run || run.id !== m.id) return;
    store.runSteps(run, m);
    // the rest of the last batch is how the run ended: finish_reason, stop_reason, text, cut, json, ...
    const finish = reply(m, "id", "steps", "flow", "held", "checks", "done", "cache_bytes");
    run.finish = { ...finish, cut: finish.cut || [], json: finish.json || null };
    run.elapsed = performance.now() - run.startedAt;
    const result = {
      status: "done", id: run.id, ...run.finish, cut: run.finish.cut.map(([, text]) => text).join(""),
      steps: run.steps.length, settings: run.settings, command: run.command,
      ...(run.engine ? { engine: run.engine } : {}), // (a model read from a file: its engine)
    };
    // (a chat turn asked for while this run's check caught up is already on its way: the check
    // was given up for it, and the page stays busy with the new run)
    if (!pending) store.setPhase("ready");
    store.runEnded(run, result);
    run.resolve(result);
  });

  client.on("invalid", (m) => {
    if (!pending || pending.id !== m.id) return;
    const asked = pending;
    pending = null;
    // the last good output stays on screen; each error goes next to its field
    store.showErrors(m.errors || [], { focus: true });
    store.setPhase("ready");
    asked.resolve({ status: "invalid", errors: m.errors || [] });
  });

  client.on("error", (m) => {
    const run = store.state.run && store.state.run.id === m.id && !store.state.run.done ? store.state.run : null;
    const asked = pending && pending.id === m.id ? pending : null;
    if (!asked && !run) return;
    fail(asked || run, run, m.message);
  });

  function fail(target, run, message) {
    if (target === pending) pending = null;
    if (run) store.runEnded(run, null); // the cache card says the run was cut off
    store.setPhase("ready");
    emit({ type: "worker", what: "failed", message });
    target.resolve({ status: "error", message });
  }

  // --- the worker lost and replaced ------------------------------------------------------------

  client.listen("lost", (event) => {
    const what = TROUBLE[event.detail.reason] || TROUBLE.crash;
    const run = store.state.run && !store.state.run.done ? store.state.run : null;
    if (pending || run) fail(pending || run, run, what);
    if (!store.state.info) return; // still starting up: the start-up screen shows the new attempt
    store.setPhase("loading");
    emit({ type: "worker", what: "lost", message: what });
  });

  client.listen("restarted", (event) => {
    store.setPhase("ready");
    const what = TROUBLE[event.detail.reason] || TROUBLE.crash;
    emit({ type: "worker", what: "restarted", message: what, ms: event.detail.ms });
    restore();
  });

  client.listen("interrupted", (event) => emit({ type: "worker", what: "interrupted", ms: event.detail.ms }));

  client.listen("restart-failed", (event) => {
    if (store.state.info) store.setPhase("loading"); // the boot error is told from the start-up state
    emit({ type: "worker", what: "restart-failed", message: event.detail.message });
  });

  // The new worker's Python knows no run. A finished run is a pure function of its settings and
  // seed, so the new worker makes it again (webapi restore); when the text and the step count
  // match what is on screen, Export trace and the lesson's view of a step work as before.
  async function restore() {
    const run = store.state.run;
    if (!run || !run.done || !run.finish) return;
    run.restored = false;
    let reply;
    try {
      reply = (await client.request({ type: "restore", settings: run.settings, steps: run.steps.length })).result;
    } catch {
      return; // the new worker failed too: the supervisor says so
    }
    if (run !== store.state.run || !reply || !reply.ok) return;
    if (reply.text !== run.finish.text || reply.steps !== run.steps.length) return;
    run.restored = true;
    emit({ type: "worker", what: "restored", run });
  }

  return {
    get lastRun() {
      return lastRun;
    },
    /** Generate with the form as it is: checked by Python first, each error next to its field. */
    generate({ slow = false } = {}) {
      if (store.state.phase !== "ready" || starting) return Promise.resolve({ status: "busy" });
      starting = true;
      stopped = false;
      // the page leaves "ready" as Generate is pressed, while Python checks the settings
      store.setPhase("generating");
      const done = deferred();
      lastRun = done.promise;
      const back = (result) => {
        starting = false;
        if (store.state.phase === "generating") store.setPhase("ready");
        done.resolve(result);
      };
      store.collect({ focus: true }).then((checked) => {
        if (store.state.phase !== "generating") return back({ status: "busy" }); // the worker was lost
        if (checked.errors) {
          const result = { status: "invalid", errors: store.state.check.errors.map(({ field, label, message }) => ({ field, label, message })) };
          back(result);
          return emit({ type: "result", result }); // refused before it started: said next to Generate
        }
        if (stopped) return back({ status: "cancelled" }); // Stop before the run began
        starting = false;
        start(checked.settings, { slow, done });
      }, (err) => back({ status: "error", message: err.message }));
      return lastRun;
    },
    /** Start a run with exactly these settings, skipping the page's checks (Python still checks). */
    start,
    stop() {
      if (starting) {
        stopped = true; // the settings are still being checked: the run never starts
        return true;
      }
      const run = store.state.run;
      const id = run && !run.done ? run.id : pending && pending.id;
      if (id == null) return false;
      client.post({ type: "stop", id });
      return true;
    },
    trace: () => client.call("trace").then((r) => JSON.stringify(r.trace)),
  };
}
