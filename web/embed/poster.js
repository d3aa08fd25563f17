// The embed poster (embed.html): a light stand-in shown until the widget is wanted. It starts
// the real page (index.html?embed=true&...) when the learner presses Start, when it scrolls into
// view (?lazy=view, the default), or at once (?lazy=none); ?lazy=click waits for the button.
// Everything in the address is passed on unchanged, plus the allowed host origins, so the
// widget checks and applies it as usual.
//
// However it starts, a widget that shows text writes a first sample at once (its link's run=false
// says not to), so a learner never meets an empty box; pressed, it also keeps the focus on
// Generate.
//
// While waiting it already answers the host: it reports its height, and a "settings" message is
// kept and passed on with the rest ("generate": true also starts it), as is a "start" message.

import { allowedOrigins, makeChannel, reportHeight } from "./embed.js";
import { installPlatform } from "./platforms.js";
import { applyTheme } from "../state/link.js";
import { VIEW_PARAMS, queryValues, viewFromQuery } from "../state/query.js";
import { $ } from "../ui/dom.js";

const values = queryValues(location.search);
const { view } = viewFromQuery(values);
applyTheme(view.theme);

const allowed = allowedOrigins(view.hosts);
const channel = makeChannel(allowed);
const fromHost = new URLSearchParams(); // settings sent before the start, passed on in the link
let started = false;

function start(how) {
  if (started) return;
  started = true;
  const params = new URLSearchParams(location.search);
  for (const name of ["embed", "lazy", "focus"]) params.delete(name);
  for (const name of new Set(fromHost.keys())) params.delete(name);
  for (const [name, value] of fromHost) params.append(name, value);
  params.set("embed", "true");
  // The link's own host= goes on as it is (the widget names a bad one); else the embedding page.
  if (!values.has("host") && allowed.length) params.set("host", allowed.join(","));
  if (how === "click") {
    params.set("run", "true");
    params.set("focus", "true");
  } else if (!params.has("run") && showsText()) {
    params.set("run", "true");
  }
  const button = $("poster-start");
  button.disabled = true;
  button.textContent = "Starting…";
  location.replace(`index.html?${params}`);
}

// The text, its step view or the live cache check: panels that show a run.
function showsText() {
  const panels = values.get("panels");
  if (!panels) return !values.has("question"); // the default panels include the text; questions alone do not
  return panels[0].split(",").map((p) => p.trim().toLowerCase()).some((p) => ["text", "inspector", "cache"].includes(p));
}

// A host's settings before the start: every value becomes text, as in a link. Only settings:
// what the page is (its panels, controls, hosts, platform) is the link's to say, and a setting
// the link fixes (controls=) is not the host's to change, before the start as after it.
const fixedBy = values.get("controls")?.[0].split(",").map((s) => s.trim().toLowerCase().replaceAll("-", "_")) || null;

function keep(settings) {
  if (!settings || typeof settings !== "object" || Array.isArray(settings)) return;
  for (const [name, value] of Object.entries(settings)) {
    if (Object.hasOwn(VIEW_PARAMS, name) || (fixedBy && !fixedBy.includes(name))) continue;
    fromHost.delete(name);
    const list = Array.isArray(value) ? value : [value];
    for (const item of list) fromHost.append(name, typeof item === "object" && item !== null ? JSON.stringify(item) : String(item));
  }
}

channel.listen((m) => {
  if (m.type === "settings") {
    keep(m.settings);
    if (m.generate === true) start("host");
  } else if (m.type === "start" || m.type === "generate") {
    if (m.type === "generate") fromHost.set("run", "true");
    start("host");
  }
});
// Canvas sizes the frame from its own message, the poster's height included (platforms.js).
reportHeight(channel, document.body, installPlatform(view.lms, channel, null).height);

// A one-line summary of what will run, from the link (the widget checks it properly).
const SHORT = [["dataset", ""], ["model", ""], ["prompt", "prompt"], ["seed", "seed"], ["temperature", "temperature"], ["top_k", "top-k"], ["top_p", "top-p"]];
const parts = [];
for (const [name, label] of SHORT) {
  const given = values.get(name);
  if (!given) continue;
  const text = name === "prompt" ? `“${given[0]}”` : given[0];
  parts.push(label ? `${label} ${text}` : text);
}
if (parts.length) {
  const summary = $("poster-settings");
  summary.textContent = `Set up with: ${parts.join(" · ")}`;
  summary.hidden = false;
}

$("poster-start").addEventListener("click", () => start("click"));
if (view.lazy === "none") {
  start("now");
} else if (view.lazy === "view") {
  const observer = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) {
      observer.disconnect();
      start("view");
    } else {
      document.documentElement.dataset.waiting = "view"; // out of view: it waits (tests see it)
    }
  }, { threshold: 0.2 });
  observer.observe($("poster"));
} else {
  document.documentElement.dataset.waiting = "click";
  $("poster-note").textContent = "Press Start to load Python, numpy and the models (about {{START_MB}}, once); nothing you type leaves the page.";
}
