// The page's state, in one place: the settings as the form holds them, what Python said of them,
// the errors shown next to the fields, and the run on screen. This module is the only one that
// changes it; every other module reads `store.state` and hears of changes with subscribe().
// The form and the address are two views of the settings; the text, the inspector and the
// lesson's panels are views of the run.
//
// A change is announced as {type, ...}:
//   info       Python's start-up answer arrived (the field table, the datasets)
//   phase      the page's state: loading, ready, generating or error (<html data-state>)
//   settings   {names, source, commit, by}: these settings changed; source "form" (the learner: a
//              keystroke, or with commit a change made, as a chosen option; by: in which
//              panel's copy of the workbench's control, ui/mirror.js),
//              "apply" (Reset, a link, a host page, Try this) or "python" (a new dataset's
//              own tokenizer or question)
//   checked    Python's verdict on the settings is in: errors shown, what greedy leaves unused
//   datasets   a dataset was added (the learner's own text)
//   run-start  {run}; steps {run, steps, flow, held}; run-end {run, result}
//   run-cleared {run}: the run on screen was another model's than the one chosen now, so it is
//              no longer on screen (Compare runs keeps runs of its own)
//   select     {run, index, focus}: a step of the run was chosen
//   chapter    {chapter, target, source}: the lesson's chapter on screen (course/course.js draws
//              it), opened from the map, the address, a Try this or its way back
//   progress   the chapters seen and the Try this suggestions run (kept for the next visit)
//   trip       {trip}: a Try this has taken the learner to the workbench (null: the trip is over)
//   pretrained the real model's load: begun, its progress in words, loaded (or gone with its
//              worker), its copy kept or forgotten (state.pretrained)
//   chat       the conversation with it changed (state.chat)
//
// Every rule about the settings is Python's (decodelab.entry.webapi.run, endpoint "check"): this
// module asks and keeps the answer. It needs a way to call Python, given by connect().

import { countChanged, formValue, forPython } from "./settings.js";

// The real model before any load: not read, nothing on its way, nothing said, nothing kept.
// (engine: the arithmetic the learner chose to read it for, Python's default until then)
const NOT_LOADED = Object.freeze({ loaded: false, info: null, loading: null, said: { text: "", failed: false }, bar: null, from: null, kept: false, engine: null });

const CHECK_MS = 350; // a quiet spell of typing after which the settings are checked

// After a change of one setting, the messages of the settings an error says it is about too
// (Python's `also`: min new tokens is about max new tokens) are looked at again. These pairs
// Python's errors do not name yet: the characters a prompt or a stop string may use and JSON
// mode depend on the model's data, the budget bounds the stop strings, and JSON mode and token
// healing exclude each other.
const RELATED = {
  model: ["prompt", "tokenizer", "stop", "json_mode"],
  dataset: ["prompt", "tokenizer", "stop", "json_mode"],
  tokenizer: ["prompt", "stop", "json_mode"],
  max_new_tokens: ["stop"],
  min_new_tokens: ["max_new_tokens"],
  json_mode: ["token_healing"],
  token_healing: ["json_mode"],
};

/** The fields whose errors, in these replies of Python's, say they are about `name` too. */
function about(name, ...replies) {
  return replies.flatMap((reply) => (reply ? reply.errors : []))
    .filter((e) => Array.isArray(e.also) && e.also.includes(name)).map((e) => e.field);
}

export function createStore() {
  const state = {
    phase: "loading",
    info: null,
    specs: {}, // field name -> its row of the field table (info.fields)
    datasets: {}, // dataset name -> what Python said of it, the learner's own text included
    names: [], // the settings the form has controls for, in the field table's order
    raw: {}, // setting -> as its control holds it
    badInput: new Set(), // number boxes holding text that is no number
    errors: {}, // setting -> the message shown next to it
    formError: "", // messages of settings that have no control on the screen
    check: null, // Python's latest verdict on raw: {values, errors, greedy, not_used, applies}
    said: {}, // setting -> why Python changed it (a tokenizer the data has not got), until the next edit
    locks: null, // setting -> value: kept whatever asks to change it (an embed's hidden controls)
    baseline: null, // what Reset goes back to (null: Python's defaults)
    run: null, // the run on screen
    pretrained: NOT_LOADED, // the real model: read into this page's Python yet, or on its way
    chat: [], // the conversation with it: {role, content}, oldest first (a system message first)
    // the course: the chapter on screen, the chapters seen and the suggestions run, and a Try
    // this that took the learner to the workbench: {id, from, text, status, answer}
    course: { chapter: null, seen: [], tried: [], trip: null },
  };
  const listeners = new Set();
  let call = null;
  let timer = 0;
  let asking = null; // the check on its way
  let again = null; // a check asked for while one was on its way: {changed}
  let epoch = 0; // counts Python's refusals of a run: a check sent before one shows no errors
  let version = 0; // counts the changes to the settings (written[name]: the change that last wrote it)
  const written = {};

  function emit(change) {
    for (const fn of [...listeners]) fn(change, state);
  }

  // --- checking, by Python ----------------------------------------------------------------------

  function request(changed) {
    return { settings: forPython(state.raw, state.specs), bad_input: [...state.badInput], changed };
  }

  // changed: the setting just changed (its messages, and those about it, are shown); reveal false:
  // none is shown that is not already (settings put in by apply are not the learner's doing)
  async function ask(changed, reveal = true, since = epoch) {
    if (asking) {
      // one more check after this one; a change of dataset is not lost (its adjustments)
      const keep = again && (again.changed === "dataset" || !changed) ? again.changed : changed;
      again = { changed: keep, reveal: Boolean(again && again.reveal) || reveal, since: again ? Math.min(again.since, since) : since };
      return asking;
    }
    const sent = { ...state.raw };
    const at = version;
    asking = (async () => {
      let reply;
      try {
        reply = await call("check", request(changed));
      } catch {
        reply = null; // the worker is being replaced: the next check answers
      }
      asking = null;
      if (reply && reply.ok) take(reply, sent, at, changed, reveal && since === epoch, since === epoch);
      if (again) {
        const next = again;
        again = null;
        await ask(next.changed, next.reveal, next.since);
      }
    })();
    return asking;
  }

  // Python's answer for the settings `sent`: its adjustments (where nothing has changed them
  // since), then the messages of the setting just changed and of those related to it (the
  // others stay as they are until they are changed, or Generate shows them all).
  function take(reply, sent, at, changed, reveal, current) {
    const before = state.check;
    const adjusted = [];
    for (const [name, value] of Object.entries(reply.adjust || {})) {
      if (isLocked(name) || (written[name] || 0) > at) continue; // changed since it was asked
      state.raw[name] = formValue(kindOf(name), value);
      written[name] = ++version;
      adjusted.push(name);
    }
    if (adjusted.length) emit({ type: "settings", names: adjusted, source: "python" });
    const stale = Object.keys(sent).some((name) => state.raw[name] !== sent[name] && !adjusted.includes(name));
    state.check = { ...reply, stale };
    if (reply.said && Object.keys(reply.said).length) state.said = { ...reply.said };
    if (!current) return emit({ type: "checked" }); // a run's refusal came after: its errors stand
    // a setting that waits for the learner (the real model, chosen and not loaded yet: Python's
    // `pending`) is not an error as they choose it; its card invites the load, and a run asked
    // for before it shows the message (collect)
    const found = Object.fromEntries(reply.errors.filter((e) => !e.pending).map((e) => [e.field, e.message]));
    // the change's own message, and those of errors about it (shown before, or now)
    const looked = changed && reveal ? [changed, ...(RELATED[changed] || []), ...about(changed, before, reply).filter((name) => state.names.includes(name))] : [];
    for (const name of new Set(looked)) setError(name, found[name] || null);
    emit({ type: "checked" });
  }

  // The run on screen is its model's: once another model is chosen, the text, the step view and
  // the next token do not go on showing it as if it were this one's.
  function dropOtherModelsRun(names) {
    const run = state.run;
    if (!names.includes("model") || !run || !run.done || !run.settings || run.settings.model === state.raw.model) return;
    state.run = null;
    emit({ type: "run-cleared", run });
  }

  function setError(name, message) {
    if (message) state.errors[name] = message;
    else delete state.errors[name];
  }

  function kindOf(name) {
    return state.specs[name] ? state.specs[name].kind : "text";
  }

  function isLocked(name) {
    return Boolean(state.locks && Object.hasOwn(state.locks, name));
  }

  function later(changed) {
    clearTimeout(timer);
    timer = setTimeout(() => {
      timer = 0;
      ask(changed);
    }, CHECK_MS);
  }

  // --- the settings -----------------------------------------------------------------------------

  /** Put values into the form (already Python's or a caller's; checked next), as Reset does.
   * fit: let Python fit the rest to the dataset (its own tokenizer); by default, when the
   * values name a dataset and no tokenizer. */
  function apply(given, { locks = true, fit = null } = {}) {
    const values = locks && state.locks ? { ...given, ...state.locks } : given;
    const names = Object.keys(values).filter((name) => state.names.includes(name));
    for (const name of names) {
      state.raw[name] = formValue(kindOf(name), values[name]);
      written[name] = ++version;
    }
    for (const name of names) state.badInput.delete(name);
    state.errors = {};
    state.said = {};
    state.formError = "";
    emit({ type: "settings", names, source: "apply" });
    dropOtherModelsRun(names);
    // a dataset given without a tokenizer takes its own (the tasks data reads BPE only)
    const fits = fit ?? ("dataset" in values && !("tokenizer" in values));
    return ask(fits ? "dataset" : null, false);
  }

  const store = {
    get state() {
      return state;
    },
    subscribe(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    /** How Python is reached: call(endpoint, request) -> Promise of the answer. */
    connect(fn) {
      call = fn;
    },
    isLocked,
    apply,

    /** Python is up: its field table, its datasets, the settings the form has controls for. */
    ready(info, names) {
      state.info = info;
      state.specs = Object.fromEntries((info.fields || []).map((spec) => [spec.name, spec]));
      state.datasets = { ...(info.datasets || {}) };
      const real = info.pretrained || {};
      const loaded = Boolean(real.loaded); // (a widget's shared Python)
      const engine = loaded ? real.engine : real.engines ? real.engines.default : null;
      state.pretrained = { ...NOT_LOADED, loaded, info: loaded ? real : null, engine };
      state.names = Object.keys(state.specs).filter((name) => names.includes(name)); // the table's order
      emit({ type: "info" });
      return apply(info.defaults || {});
    },

    /** The learner changed a control: commit (a change, not a keystroke) checks it at once;
     * source: who changed it, when not the control itself (the control then shows it); by: the
     * panel whose copy of the workbench's control it was (ui/mirror.js), so the workbench's
     * control shows it. */
    edit(name, value, { badInput = false, commit = false, source = "form", by = null } = {}) {
      if (!state.names.includes(name)) return;
      state.raw[name] = value;
      written[name] = ++version;
      state.said = {};
      if (badInput) state.badInput.add(name);
      else state.badInput.delete(name);
      emit({ type: "settings", names: [name], source, commit, by });
      dropOtherModelsRun([name]);
      if (commit || state.errors[name]) { // a fixed error clears at once
        clearTimeout(timer);
        ask(name);
      } else {
        later(name);
      }
    },

    /** Reset: the link's values in an embed (baseline), else Python's defaults. */
    reset() {
      if (state.info) return apply(state.baseline || state.info.defaults || {});
      return Promise.resolve();
    },

    /** Keep these settings as they are (an embed's hidden controls), and what Reset restores. */
    lock(values, baseline) {
      state.locks = values && Object.keys(values).length ? { ...values } : null;
      state.baseline = baseline ? { ...baseline } : null;
    },

    /** Python's verdict on the settings as they are now (a check waiting for a pause runs now). */
    async settled() {
      if (timer) {
        clearTimeout(timer);
        timer = 0;
        await ask(null);
      }
      while (asking) await asking;
      if (!state.check || state.check.stale) await ask(null);
      return state.check;
    },

    /**
     * The settings checked, with every error shown next to its field (the setting of a hidden
     * control under the form): {settings} or {errors: {name: message}}.
     */
    async collect({ focus = false } = {}) {
      const check = await store.settled();
      store.showErrors(check.errors, { focus });
      if (!check.errors.length) return { settings: { ...check.values } };
      return { errors: Object.fromEntries(check.errors.map((e) => [e.field, e.message])) };
    },

    /** Show Python's errors next to their fields; those with no control on the screen under the form. */
    showErrors(errors, { focus = false } = {}) {
      clearTimeout(timer); // a field's own check, waiting for a pause, would wipe these
      timer = 0;
      epoch += 1;
      state.errors = {};
      const unplaced = [];
      for (const e of errors || []) {
        if (state.names.includes(e.field) && !isLocked(e.field)) setError(e.field, e.message);
        else unplaced.push(e.message);
      }
      state.formError = unplaced.join(" ");
      emit({ type: "checked", focus });
    },

    /** What happens around the run (state/run.js): asked, result, worker. Nothing is written. */
    announce(change) {
      emit(change);
    },

    /** Python's verdict on other settings (a link's, a host's), leaving the form as it is. */
    async verify(settings) {
      const reply = await call("check", { settings, bad_input: [], changed: null });
      if (!reply.ok) throw new Error(reply.errors.map((e) => e.message).join(" "));
      return reply;
    },

    /** The form's values as a link and Python read them (the stop strings as a list). */
    values() {
      return forPython(state.raw, state.specs);
    },

    /** "More rules (2 changed)": how many of these settings are not at their defaults. */
    changed(names) {
      return countChanged(state.raw, (state.info && state.info.defaults) || {}, names, state.specs);
    },

    /** The real model was read into Python (info: what Python said of it; from: "site", "kept"
     * or "disk"; kept: this browser keeps a copy), or went with the worker that held it (null:
     * where it came from is remembered, to read it back). The settings are checked again: a run
     * of it may start now. */
    pretrainedLoaded(info, { from = state.pretrained.from, kept = state.pretrained.kept } = {}) {
      state.pretrained = info ? { ...state.pretrained, loaded: true, info, from, kept } : { ...state.pretrained, loaded: false, info: null };
      emit({ type: "pretrained" });
      // checked again (a run of it may start now), as no change of model: the sampling the
      // learner has set stays (a model read again for another engine, or after a restart)
      if (call && state.info) ask(null, true);
    },

    /** A load of the real model began ({id, again: read back after a restart, file: the name of
     * a file of the learner's own}) or ended (null). */
    pretrainedLoading(loading) {
      state.pretrained = { ...state.pretrained, loading };
      emit({ type: "pretrained" });
    },

    /** How the load goes, in words ({text, failed}), and how far (bar: a fraction, "busy" while
     * it cannot say, or null when no bar shows). */
    pretrainedSaid(said, bar = state.pretrained.bar) {
      state.pretrained = { ...state.pretrained, said, bar };
      emit({ type: "pretrained" });
    },

    /** The engine the learner chose for the real model (an id of info.pretrained.engines):
     * the next load reads the file for it. */
    pretrainedEngine(engine) {
      state.pretrained = { ...state.pretrained, engine };
      emit({ type: "pretrained" });
    },

    /** This browser keeps a copy of the file (or no longer does: the learner deleted it). */
    pretrainedKept(kept) {
      state.pretrained = { ...state.pretrained, kept };
      emit({ type: "pretrained" });
    },

    /** The conversation with the real model: these messages (a turn's question and answer,
     * appended), or none (a new conversation). */
    chatSaid(messages) {
      state.chat = messages ? [...state.chat, ...messages] : [];
      emit({ type: "chat" });
    },

    /** A dataset was added (the learner's own text) or updated. */
    addDataset(info) {
      state.datasets = { ...state.datasets, [info.name]: info };
      emit({ type: "datasets", name: info.name });
    },

    // --- the page and its run (state/run.js reports them) ----------------------------------------

    setPhase(phase) {
      if (state.phase === phase) return;
      state.phase = phase;
      emit({ type: "phase", phase });
    },

    runStarted(run) {
      state.run = run;
      emit({ type: "run-start", run });
    },

    runSteps(run, batch) {
      if (run !== state.run) return;
      for (const [step, text] of batch.flow || []) {
        if (text != null) run.shown[step] = (run.shown[step] || 0) + [...text].length;
      }
      const steps = batch.steps || [];
      run.steps.push(...steps);
      // the live cache check runs behind the text: its verdicts for steps already here
      for (const [step, diff, ok] of batch.checks || []) {
        const s = run.steps[step];
        if (s) Object.assign(s, { cache_diff: diff, cache_ok: ok });
      }
      run.held = batch.held || [];
      run.checking = Boolean(batch.checking); // the text has ended; the live check is catching up
      if (run.checking) run.text = batch.text; // final: the check changes no token
      // the time of the text itself, before the check's catching up: what the run's line says
      if (run.checking && run.textElapsed == null) run.textElapsed = performance.now() - run.startedAt;
      run.reading = batch.reading || null; // a long prompt, read a chunk per batch: {done, total}
      if (run.reading) run.readPrompt = true;
      // the time to the first step: with a long prompt, the time its reading took
      if (run.firstElapsed == null && steps.length) run.firstElapsed = performance.now() - run.startedAt;
      if (batch.cache_bytes != null) run.cacheBytes = batch.cache_bytes; // what its cache holds allocated now
      if (run.follow && run.steps.length) run.selected = run.steps.length - 1;
      emit({ type: "steps", run, steps, flow: batch.flow || [], held: run.held });
    },

    runEnded(run, result) {
      if (run !== state.run) return;
      run.done = true;
      run.held = [];
      emit({ type: "run-end", run, result });
    },

    // --- the course (course/course.js draws it) -------------------------------------------------

    openChapter(chapter, { target = null, source = "map" } = {}) {
      const course = state.course;
      // a trip ends on the way back, or when the learner goes elsewhere on their own
      if (source === "back" || (source !== "trip" && course.chapter !== chapter)) course.trip = null;
      course.chapter = chapter;
      if (!course.seen.includes(chapter)) course.seen = [...course.seen, chapter];
      emit({ type: "chapter", chapter, target, source });
    },

    /** The progress of an earlier visit, as it was kept (unknown names are the caller's to drop). */
    restoreProgress({ seen = [], tried = [] } = {}) {
      const course = state.course;
      course.seen = [...new Set([...course.seen, ...seen])];
      course.tried = [...new Set([...course.tried, ...tried])];
      emit({ type: "progress" });
    },

    tried(id) {
      if (state.course.tried.includes(id)) return;
      state.course.tried = [...state.course.tried, id];
      emit({ type: "progress" });
    },

    /** A Try this on its way (trip: {id, from, text}), its news ({status, answer}), or null. */
    trip(trip) {
      const course = state.course;
      course.trip = trip && course.trip && course.trip.id === trip.id ? { ...course.trip, ...trip } : trip;
      emit({ type: "trip", trip: course.trip });
    },

    select(index, { focus = false } = {}) {
      const run = state.run;
      if (!run || index == null || index < 0 || index >= run.steps.length) return;
      run.selected = index;
      run.follow = false;
      emit({ type: "select", run, index, focus });
    },
  };
  return store;
}
