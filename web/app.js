// decodelab's page, put together. Python runs in a worker (runtime/); the page's state lives in
// one store (state/store.js) that only it changes; every view draws what the store announces:
//
//   state/    store (the settings and the run), run (a run from Generate to its end), link (the
//             address), settings and query (pure helpers)
//   ui/       the start-up line, the settings form, the run bar, the generated text, the step
//             inspector, training on your own text, the share card, accessibility, the hooks
//   pretrained/ the real model: its load, its card, a file of one's own, the chat
//   course/   the chapters: the map, the address of each, the trip of a Try this and back
//   lesson/   the panels of the lesson, kv/ those of the KV cache, search/ beam search and
//             speculative decoding, serving/ a paged cache serving many requests,
//             twoengines/ the real model on both engines, embed/ the page as a widget
//
// docs/architecture.md has the map and the data flow.

import { installCourse } from "./course/course.js";
import { installEmbed } from "./embed/embed.js";
import { installEmbedder } from "./embed/embedder.js";
import { createKvLab } from "./kv/kv.js";
import { createLesson } from "./lesson/lesson.js";
import { createSearch } from "./search/search.js";
import { createPretrained } from "./pretrained/pretrained.js";
import { createServing } from "./serving/serving.js";
import { createTwoEngines } from "./twoengines/twoengines.js";
import { createClient } from "./runtime/client.js";
import { createOffline } from "./runtime/offline.js";
import { unsupported } from "./runtime/support.js";
import { installUrlState } from "./state/link.js";
import { createRuns } from "./state/run.js";
import { createStore } from "./state/store.js";
import { installA11y } from "./ui/a11y.js";
import { createBoot } from "./ui/boot.js";
import { $ } from "./ui/dom.js";
import { installExports } from "./ui/exports.js";
import { installHandoff } from "./ui/handoff.js";
import { createForm } from "./ui/form.js";
import { createHooks } from "./ui/hooks.js";
import { createInspector } from "./ui/inspector.js";
import { createRunBar } from "./ui/runbar.js";
import { createTextView } from "./ui/text.js";
import { createTraining } from "./ui/train.js";

const store = createStore();
// The worker, watched: restarted if it stops answering or crashes (supervisor.js, state/run.js).
const client = createClient(new URL("./runtime/worker.js", import.meta.url));
store.connect(client.call);
const runs = createRuns(store, client);

let readyResolve;
let readyReject;
const ready = new Promise((resolve, reject) => {
  readyResolve = resolve;
  readyReject = reject;
});
ready.catch(() => {}); // a failed boot is shown on the page; tests may still await the rejection

// The views, in the order they hear the store: the start-up line first (it sets <html
// data-state>), the step inspector before what reads its words.
const boot = createBoot(store);
const runbar = createRunBar(store, runs);
const form = createForm(store, { generate: runbar.generate });
const text = createTextView(store);
createInspector(store);
createTraining(store, client.call);
const pretrained = createPretrained(store, client, runs);

const hooks = createHooks({ store, runs, client, text, ready });
window.decodelab = hooks;
hooks.pretrained = pretrained;

// What the lesson's panels and the KV-cache panels need of the page.
const app = {
  store,
  call: client.call,
  stoppable: client.stoppable,
  info: () => store.state.info,
  run: () => store.state.run,
  settings: () => store.state.raw,
  select: (index, options) => store.select(index, options),
  collect: () => store.collect(),
  // settings on top of the defaults; a dataset given without a tokenizer takes its own
  apply: (values) => store.apply({ ...store.state.info.defaults, ...values }, { fit: !("tokenizer" in values) }),
  generate: () => runbar.generate(),
  /** fn() after the learner changes this setting (a panel's defaults follow the dataset). */
  onSetting: (name, fn) => store.subscribe((change) => {
    if (change.type === "settings" && change.source === "form" && change.commit && change.names.includes(name)) fn();
  }),
  /** The worker's memory now: {wasm_bytes, ...} (runtime/health.js). */
  memory: () => client.request({ type: "memory-report" }).then((m) => m.result),
  kv: () => kv,
  serving: () => serving,
  search: () => searchLab,
  /** A link to this page with the form's settings and `extra` (a panel's own), and what the
   * page's address gave for a panel's own settings (state/link.js). */
  link: (extra) => hooks.share.link(extra),
  fromLink: (names) => hooks.share.panel(names),
  /** Bring a part of the page into view: its chapter opened first when another is on screen. */
  show(node) {
    const chapter = node.closest(".chapter[data-chapter]");
    if (chapter && chapter.hidden) return store.openChapter(chapter.dataset.chapter, { target: node.id, source: "jump" });
    const calm = window.matchMedia("(prefers-reduced-motion: reduce)").matches;
    node.scrollIntoView({ block: "start", behavior: calm ? "auto" : "smooth" });
  },
  text,
  last: {}, // each lesson panel's latest reply from Python (tests read it)
};
const lesson = createLesson(app);
const kv = createKvLab({ ...app, last: {} });
const searchLab = createSearch({ ...app, last: {}, keep: (run) => lesson.runs.add(run) }); // searches join Compare runs
hooks.lesson = lesson;
hooks.kv = kv;
hooks.search = searchLab;
const serving = createServing({ ...app, last: {} });
hooks.serving = serving;
const twoEngines = createTwoEngines({ ...app, last: {} });
hooks.twoengines = twoEngines;

// Offline after the first visit (offline.js, sw.js): started once the page is ready.
const offline = createOffline($("offline"));
hooks.offline = offline.status;

// Work done before the page says it is ready (the address's settings applied, an embed's hidden
// settings fixed), and at once after it (an embed tells its host), in the order asked for.
const before = [];
const after = [];
const page = {
  store, runs, hooks, form, call: client.call, generate: runbar.generate,
  beforeReady: (fn) => before.push(fn),
  afterReady: (fn) => after.push(fn),
};

client.on("progress", (m) => boot.progress(m));
let warmedUp = null; // the worker's first short run of each model, just after its start
client.on("warmed-up", (m) => {
  warmedUp = m.ms;
  if (hooks.timings) hooks.timings.warmup_ms = m.ms;
});
client.on("boot-error", (m) => bootError(m.message));
client.on("ready", async ({ info, timings }) => {
  try {
    await store.ready(info, form.names);
    lesson.ready();
    kv.ready();
    searchLab.ready();
    serving.ready();
    twoEngines.ready();
    for (const fn of before) await fn();
  } catch (err) {
    return bootError(`The page could not be set up: ${err.message}`);
  }
  hooks.timings = { ...(timings || {}), page_ready_ms: Math.round(performance.now()) };
  if (warmedUp != null) hooks.timings.warmup_ms = warmedUp;
  boot.ready(timings || {});
  store.setPhase("ready");
  readyResolve(info);
  for (const fn of after) fn();
  // a link that asks for its run: in the same moment, or once the real model it names is loaded
  if (hooks.share.view.run && !pretrained.runWhenLoaded(() => runbar.generate())) runbar.generate();
  offline.start(); // saving the site waits for the page's start (a second call does nothing)
});
client.listen("error", (event) => {
  event.preventDefault();
  if (store.state.phase === "loading") bootError(`The background worker that runs Python could not start${event.message ? `: ${event.message}` : "."}`);
});
store.subscribe((change) => {
  if (change.type === "worker" && change.what === "restart-failed") readyReject(new Error(change.message));
});

function bootError(message, remedy) {
  boot.failed(message, remedy);
  readyReject(new Error(message));
}

// A browser that cannot run the lesson is told so in words, and what to do (support.js).
const cannot = unsupported();
if (cannot) bootError(cannot.problem, cannot.remedy);

// Announcing, sharing, exporting, embedding: their own modules, on the store.
installA11y(page);
installUrlState(page);
installExports(page);
installHandoff(page);
installEmbed(page);
hooks.course = installCourse(page); // after the widget's: a widget has no chapters
installEmbedder(page);
