// The page as a widget inside a course page (index.html?embed=true, reached through embed.html).
//
// Compact: the masthead shrinks to a title bar with a link to the full page, and only the panels
// named by ?panels= show. ?controls= narrows the settings form to the controls it names, one idea
// per widget; every other setting keeps the link's value, whoever asks to change it (a host
// page's message is told so). Text that points at a panel or control not on screen gives way to
// words that do not (presence.js). Talks to the page that embeds it with window.postMessage, in both
// directions, only with origins on its allow-list: the ?host= parameter, or else the embedding
// page's own origin. Every message is a plain object {decodelab: 1, type: "...", ...}.
//
//   widget -> host   ready     {version, settings, errors}   Python is up, the link's settings applied
//                    height    {height}                      the page's height in CSS pixels, on change
//                    started   {settings}                    a run began
//                    finished  {finish_reason, stop_reason, text, steps, settings}
//                    error     {errors: [{field, message}]} or {message}  a run was refused or failed
//                    applied   {settings, errors}            the reply to "settings"
//                    answered  {grade, state}                a quiz question was checked
//                    grade     {grade}                       the reply to "get-grade"
//                    state     {state, errors}               the reply to "get-state" and "set-state"
//   host -> widget   settings  {settings: {...}, generate: true|false}
//                    generate  {}
//                    get-grade {}                            the quiz's answers as they stand, marked
//                    get-state {}                            the quiz's answers, to save
//                    set-state {state}                       put saved answers back
//
// Settings from a host are checked by the same field table as the form and the address; a bad
// one is reported (in the "applied" reply and on the page) and the rest still applies.

import { showNotice } from "../state/link.js";
import { $ } from "../ui/dom.js";
import { installPlatform } from "./platforms.js";
import { setOnScreen } from "./presence.js";

export const NAMESPACE = "decodelab";
export const VERSION = 1;
export const DEFAULT_PANELS = ["controls", "text", "inspector"];

// --- origins and messages (shared with the poster, poster.js) ------------------------------

function originFrom(url) {
  try {
    const origin = new URL(url).origin;
    return origin && origin !== "null" ? origin : null;
  } catch {
    return null;
  }
}

/** The origin of the page that embeds this one, as the browser reports it (null at top level). */
export function parentOrigin() {
  if (window.parent === window) return null;
  const ancestors = location.ancestorOrigins;
  if (ancestors && ancestors.length) return originFrom(ancestors[0]);
  return document.referrer ? originFrom(document.referrer) : null;
}

/** Origins allowed to talk to this widget: those the link names, or else the embedding page's. */
export function allowedOrigins(hosts) {
  if (window.parent === window) return [];
  if (hosts && hosts.length) return [...hosts];
  const parent = parentOrigin();
  return parent ? [parent] : [];
}

/**
 * A message channel to the embedding page, limited to the allowed origins.
 * post(type, fields) sends only to an allowed origin; listen(handler) hears only messages from
 * the parent window, from an allowed origin, in the decodelab namespace; every other message
 * is dropped and counted in channel.ignored.
 */
export function makeChannel(allowed) {
  const channel = { allowed, ignored: 0, handlers: [], others: [] };
  // Post only where the parent really is: the browser tells us its origin when it can (then one
  // message to it if it is allowed); otherwise one message per allowed origin, and the browser
  // delivers only the one that matches.
  const known = location.ancestorOrigins && location.ancestorOrigins.length ? parentOrigin() : null;
  const targets = known ? (allowed.includes(known) ? [known] : []) : allowed;
  channel.post = (type, fields = {}) => channel.postRaw({ [NAMESPACE]: VERSION, type, ...fields });
  // A message in a platform's own format (platforms.js), to the same targets.
  channel.postRaw = (message) => {
    if (window.parent === window) return;
    for (const origin of targets) window.parent.postMessage(message, origin);
  };
  window.addEventListener("message", (event) => {
    const m = event.data;
    if (event.source !== window.parent || window.parent === window || !allowed.includes(event.origin)) {
      channel.ignored += 1; // counted, so a test (or a curious author) can see it happen
      return;
    }
    if (!m || typeof m !== "object" || m[NAMESPACE] !== VERSION || typeof m.type !== "string") {
      // not ours: a platform's protocol may claim it (platforms.js)
      if (!channel.others.some((handler) => handler(m))) channel.ignored += 1;
      return;
    }
    for (const handler of channel.handlers) handler(m);
  });
  channel.listen = (handler) => channel.handlers.push(handler);
  // handler(data) -> true when it took a message that is not in the decodelab namespace
  channel.listenOthers = (handler) => channel.others.push(handler);
  return channel;
}

/**
 * Tell the host the page's height whenever it changes, so the iframe can fit it; also(height)
 * tells a platform in its own words (platforms.js).
 */
export function reportHeight(channel, node = document.body, also = null) {
  let last = 0;
  let frame = 0;
  const send = () => {
    frame = 0;
    const height = Math.ceil(node.getBoundingClientRect().height);
    if (height && height !== last) {
      last = height;
      channel.post("height", { height });
      also?.(height);
    }
  };
  new ResizeObserver(() => {
    if (!frame) frame = requestAnimationFrame(send);
  }).observe(node);
  send();
}

// --- the widget ----------------------------------------------------------------------------

/** Turn the page into the widget when the address says embed=true. */
export function installEmbed(page) {
  const { store, runs, hooks, form } = page;
  const share = hooks.share;
  if (!share || !share.view.embed) return null;
  const root = document.documentElement;
  const view = share.view;
  root.dataset.embed = "true";
  // ?question= on its own shows those questions alone
  const panels = view.panels || (view.question ? ["questions"] : DEFAULT_PANELS);
  const quiz = hooks.lesson?.questions;
  if (view.question && quiz) quiz.only(view.question);
  for (const node of document.querySelectorAll("[data-panel]")) {
    if (panels.includes(node.dataset.panel)) delete node.dataset.panelOff;
    else node.dataset.panelOff = "true";
  }
  // boxes around panels that are all off go too (with their borders), and the first part shown
  // sits at the top, without the rule that separates parts
  for (const box of document.querySelectorAll("#workbench, #workbench .bench-top, #stage")) {
    if (!box.querySelector("[data-panel]:not([data-panel-off])")) box.dataset.panelOff = "true";
  }
  const first = document.querySelector("#main > .chapter > [data-panel]:not([data-panel-off]), #main > .chapter > .workbench:not([data-panel-off])");
  if (first) first.dataset.first = "true";
  const chosen = view.controls || form.names;
  if (view.controls) form.only(chosen);
  setOnScreen([...panels, ...(panels.includes("controls") ? chosen : [])]);
  addTitleBar(store, share);

  const channel = makeChannel(allowedOrigins(view.hosts));
  const embed = {
    channel, panels, controls: view.controls, quiz, get ignored() { return channel.ignored; }, allowed: channel.allowed,
  };
  hooks.embed = embed;
  const platform = installPlatform(view.lms, channel, quiz);
  embed.platform = platform;
  reportHeight(channel, document.body, platform.height);

  const current = share.current;

  if (quiz) quiz.onAnswer(() => channel.post("answered", { grade: quiz.grade(), state: quiz.state() }));
  store.subscribe((change) => {
    if (change.type === "asked") channel.post("started", { settings: change.settings });
    if (change.type !== "result") return;
    const r = change.result || {};
    if (r.status === "done") {
      channel.post("finished", {
        finish_reason: r.finish_reason, stop_reason: r.stop_reason, text: r.text, steps: r.steps, settings: r.settings,
      });
    } else if (r.status === "invalid") {
      channel.post("error", { errors: r.errors || [] });
    } else {
      channel.post("error", { message: r.message || "The run failed." });
    }
  });

  // The link's values are where Reset returns; the controls not shown stay at them (from
  // before the page says it is ready).
  let start = null;
  page.beforeReady(async () => {
    start = await current();
    const locked = view.controls
      ? Object.fromEntries(Object.entries(start).filter(([name]) => !view.controls.includes(name)))
      : null;
    store.lock(locked, start);
  });
  // The host hears "ready" the moment the page is, before the link's first run starts.
  page.afterReady(() => {
    channel.post("ready", { version: hooks.info?.version, settings: start, errors: share.errors });
    if (view.focus) $("generate").focus({ preventScroll: true });
  });
  // Host requests run one after another, after start-up, and never on top of a running run.
  let queue = hooks.ready;
  queue.catch(() => {});
  channel.listen((m) => {
    // the quiz needs no Python: it answers at once, even while Python is still loading
    if (m.type === "get-grade") channel.post("grade", { grade: quiz.grade() });
    else if (m.type === "get-state") channel.post("state", { state: quiz.state(), errors: [] });
    else if (m.type === "set-state") channel.post("state", { errors: restoreQuiz(m.state), state: quiz.state() });
    else queue = queue.then(() => handle(m)).catch(() => {});
  });

  async function idle() {
    while (store.state.phase === "generating") await runs.lastRun;
  }

  async function handle(m) {
    if (m.type === "settings") {
      await idle();
      const { free, refused } = splitLocked(m.settings, await current());
      const { values, errors: problems } = await share.check(free);
      const errors = [...refused, ...problems];
      await store.apply(values);
      showNotice($("link-notice"), errors, "host");
      channel.post("applied", { settings: await current(), errors });
      if (m.generate === true) await generate();
    } else if (m.type === "generate") {
      await idle();
      await generate();
    }
  }

  // A saved state put back; whatever goes wrong is a reason in the reply, never silence.
  function restoreQuiz(state) {
    try {
      return quiz.restore(state);
    } catch (err) {
      return [{ field: "state", message: `The quiz state could not be restored: ${err.message || err}` }];
    }
  }

  // Settings a host may not change: those whose controls the link leaves out.
  function splitLocked(settings, values) {
    if (!settings || typeof settings !== "object" || Array.isArray(settings)) return { free: settings, refused: [] };
    const free = {};
    const refused = [];
    for (const [name, value] of Object.entries(settings)) {
      if (!store.isLocked(name)) {
        free[name] = value;
        continue;
      }
      const shown = JSON.stringify(values[name]);
      refused.push({
        field: name,
        message: `${form.label(name)} is fixed in this widget, whose link shows only ${listOf(view.controls.map(form.label))}; it stays ${shown}.`,
      });
    }
    return { free, refused };
  }

  // Generate as the button does, so the form's own checks apply. A run that never starts (the
  // form holds a bad value) sends no run events, so its refusal is reported here.
  async function generate() {
    const button = $("generate");
    if (root.dataset.state !== "ready" || button.disabled) {
      channel.post("error", { message: `The widget cannot generate now (it is ${root.dataset.state}).` });
      return;
    }
    let started = false;
    const off = store.subscribe((change) => { if (change.type === "asked") started = true; });
    const result = await page.generate();
    off();
    if (!started && result && result.status === "invalid") channel.post("error", { errors: result.errors || [] });
  }
  return embed;
}

function listOf(items) {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`;
}

// The masthead becomes one line: the name, the start-up status, and a way out to the full page.
function addTitleBar(store, share) {
  const brand = document.querySelector(".masthead .brand");
  if (!brand || $("open-full")) return;
  const link = document.createElement("a");
  link.id = "open-full";
  link.className = "open-full";
  link.target = "_blank";
  link.rel = "noopener";
  link.textContent = "Open the full lesson";
  const update = () => {
    link.href = share.link();
  };
  update();
  store.subscribe((change) => { if (change.type === "settings") update(); });
  link.addEventListener("focus", update);
  link.addEventListener("pointerdown", update);
  brand.append(link);
}
