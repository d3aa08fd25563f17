// The page as a widget inside a course page (index.html?embed=true, reached through embed.html).
//
// Compact: the masthead shrinks to a title bar with a link to the full page, and only the panels
// named by ?panels= show. Talks to the page that embeds it with window.postMessage, in both
// directions, only with origins on its allow-list: the ?host= parameter, or else the embedding
// page's own origin. Every message is a plain object {decodelab: 1, type: "...", ...}.
//
//   widget -> host   ready     {version, settings, errors}   Python is up, the link's settings applied
//                    height    {height}                      the page's height in CSS pixels, on change
//                    started   {settings}                    a run began
//                    finished  {finish_reason, stop_reason, text, steps, settings}
//                    error     {errors: [{field, message}]} or {message}  a run was refused or failed
//                    applied   {settings, errors}            the reply to "settings"
//   host -> widget   settings  {settings: {...}, generate: true|false}
//                    generate  {}
//
// Settings from a host are checked by the same field table as the form and the address; a bad
// one is reported (in the "applied" reply and on the page) and the rest still applies.

import { showNotice } from "./urlstate.js";

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
  const channel = { allowed, ignored: 0, handlers: [] };
  // Post only where the parent really is: the browser tells us its origin when it can (then one
  // message to it if it is allowed); otherwise one message per allowed origin, and the browser
  // delivers only the one that matches.
  const known = location.ancestorOrigins && location.ancestorOrigins.length ? parentOrigin() : null;
  const targets = known ? (allowed.includes(known) ? [known] : []) : allowed;
  channel.post = (type, fields = {}) => {
    if (window.parent === window) return;
    for (const origin of targets) window.parent.postMessage({ [NAMESPACE]: VERSION, type, ...fields }, origin);
  };
  window.addEventListener("message", (event) => {
    const m = event.data;
    if (event.source !== window.parent || window.parent === window || !allowed.includes(event.origin)
        || !m || typeof m !== "object" || m[NAMESPACE] !== VERSION || typeof m.type !== "string") {
      channel.ignored += 1; // counted, so a test (or a curious author) can see it happen
      return;
    }
    for (const handler of channel.handlers) handler(m);
  });
  channel.listen = (handler) => channel.handlers.push(handler);
  return channel;
}

/** Tell the host the page's height whenever it changes, so the iframe can fit it. */
export function reportHeight(channel, node = document.body) {
  let last = 0;
  let frame = 0;
  const send = () => {
    frame = 0;
    const height = Math.ceil(node.getBoundingClientRect().height);
    if (height && height !== last) {
      last = height;
      channel.post("height", { height });
    }
  };
  new ResizeObserver(() => {
    if (!frame) frame = requestAnimationFrame(send);
  }).observe(node);
  send();
}

// --- the widget ----------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);

/** Turn the page into the widget when the address says embed=true. */
export function installEmbed(hooks) {
  const share = hooks.share;
  if (!share || !share.view.embed) return null;
  const root = document.documentElement;
  const view = share.view;
  root.dataset.embed = "true";
  const panels = view.panels || DEFAULT_PANELS;
  for (const node of document.querySelectorAll("[data-panel]")) {
    if (panels.includes(node.dataset.panel)) delete node.dataset.panelOff;
    else node.dataset.panelOff = "true";
  }
  addTitleBar(hooks);

  const channel = makeChannel(allowedOrigins(view.hosts));
  const embed = { channel, panels, get ignored() { return channel.ignored; }, allowed: channel.allowed };
  hooks.embed = embed;
  reportHeight(channel);

  const current = () => share.check(share.read()).values;

  document.addEventListener("decodelab:run-start", (event) => {
    channel.post("started", { settings: event.detail.settings });
  });
  document.addEventListener("decodelab:run-end", (event) => {
    const r = event.detail || {};
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

  // Host requests run one after another, after start-up, and never on top of a running run.
  let queue = hooks.ready.then(() => {
    channel.post("ready", { version: hooks.info?.version, settings: current(), errors: share.errors });
    if (view.focus) $("generate").focus({ preventScroll: true });
  });
  queue.catch(() => {});
  channel.listen((m) => {
    queue = queue.then(() => handle(m)).catch(() => {});
  });

  async function idle() {
    while (root.dataset.state === "generating") await hooks.lastRun;
  }

  async function handle(m) {
    if (m.type === "settings") {
      await idle();
      const { values, errors } = share.check(m.settings);
      hooks.applySettings(values);
      showNotice($("link-notice"), errors, "host");
      channel.post("applied", { settings: current(), errors });
      if (m.generate === true) await generate();
    } else if (m.type === "generate") {
      await idle();
      await generate();
    }
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
    const mark = () => { started = true; };
    document.addEventListener("decodelab:run-start", mark, { once: true });
    button.click();
    const result = await hooks.lastRun;
    document.removeEventListener("decodelab:run-start", mark);
    if (!started && result && result.status === "invalid") channel.post("error", { errors: result.errors || [] });
  }
  return embed;
}

// The masthead becomes one line: the name, the start-up status, and a way out to the full page.
function addTitleBar(hooks) {
  const brand = document.querySelector(".masthead .brand");
  if (!brand || $("open-full")) return;
  const link = document.createElement("a");
  link.id = "open-full";
  link.className = "open-full";
  link.target = "_blank";
  link.rel = "noopener";
  link.textContent = "Open the full lesson";
  const update = () => {
    link.href = hooks.share.link();
  };
  update();
  hooks.ready.then(update, () => {});
  const form = $("settings");
  form.addEventListener("change", update);
  form.addEventListener("input", update);
  link.addEventListener("focus", update);
  link.addEventListener("pointerdown", update);
  brand.append(link);
}
