// Settings in the address. Every setting on the form lives in the page's URL, so a link
// reproduces a run: ?dataset=names&prompt=ma&seed=3&temperature=0.8&run=1
//
// A link is input like any other, so it is checked by the same field table that checks the form
// (info.fields, sent by Python), with the same words. A bad entry is reported in a notice that
// names the field and what is allowed; that field keeps its default and the rest still applies.
// The same checks serve settings that a host page sends to an embedded widget (embed.js).
//
// Besides settings, a few parameters describe the page itself (VIEW_PARAMS below).

import { checkField, checkTogether, pyRepr, splitLines, vocabOf } from "./validate.js";

// Parameters about the page, not the run, with their allowed values in words.
export const VIEW_PARAMS = {
  theme: "one of light, dark, auto",
  panels: "a comma-separated list of panel names",
  controls: "a comma-separated list of setting names (the only controls an embedded widget shows)",
  question: "the names of the questions to show, separated by commas",
  lms: "one of canvas, edx, none (the learning platform whose protocol to speak)",
  run: "true or false (true: generate once the page is ready)",
  embed: "true or false (true: the compact page for embedding)",
  lazy: "one of view, click, none",
  host: "one or more origins such as https://course.example.org, separated by commas",
  focus: "true or false",
  faults: "1 (tests only: lets a test make the Python worker hang or crash)",
  worker: "dedicated or shared: a widget's Python of its own, or one shared with the site's other widgets",
  watchdog: "a number of milliseconds, at least 500 (tests only, with faults=1)",
};
export const THEMES = ["light", "dark", "auto"];
export const LAZY = ["view", "click", "none"];
export const LMS = ["canvas", "edx", "none"];

const TRUE_WORDS = ["true", "1", "on", "yes"];
const FALSE_WORDS = ["false", "0", "off", "no", ""];

function shown(text) {
  return text.length <= 40 ? text : `${text.slice(0, 37)}...`;
}

/** A yes/no value the way Python's settings table reads one (true/1/on/yes, false/0/off/no). */
export function parseBool(value) {
  if (typeof value === "boolean") return value;
  if (value === 0 || value === 1) return Boolean(value);
  if (typeof value !== "string") return null;
  const word = value.trim().toLowerCase();
  if (TRUE_WORDS.includes(word)) return true;
  if (FALSE_WORDS.includes(word)) return false;
  return null;
}

function describeValue(value) {
  if (typeof value === "string") return shown(pyRepr(value));
  if (Array.isArray(value)) return "a list";
  if (value === null) return "nothing";
  if (typeof value === "object") return "an object";
  return shown(String(value));
}

// --- reading a query string ----------------------------------------------------------------

/** name -> every value given for it, in order (a name may appear more than once). */
export function queryValues(search) {
  const out = new Map();
  for (const [name, value] of new URLSearchParams(search)) {
    if (!out.has(name)) out.set(name, []);
    out.get(name).push(value);
  }
  return out;
}

/**
 * Settings from a query: the raw values (strings; the stop strings as a list) by field name,
 * plus errors for names that are neither a setting nor a page parameter and for settings given
 * twice. `settable` is the list of field names this page has controls for.
 */
export function settingsFromQuery(values, settable, specs) {
  const raw = {};
  const errors = [];
  for (const [name, list] of values) {
    if (Object.hasOwn(VIEW_PARAMS, name)) continue;
    const spec = specs[name];
    if (!spec || !settable.includes(name)) {
      errors.push({
        field: name,
        message: `Unknown setting ${shown(pyRepr(name))} in the link; known settings are ${settable.join(", ")}.`,
      });
    } else if (spec.kind === "lines") {
      raw[name] = list.filter((line) => line !== "");
    } else if (list.length > 1) {
      errors.push({
        field: name,
        message: `${spec.label} is given ${list.length} times in the link; give it once (${spec.allowed}).`,
      });
    } else {
      raw[name] = list[0];
    }
  }
  return { raw, errors };
}

// --- checking settings ---------------------------------------------------------------------

/**
 * Check raw settings (from a link: strings; from a host page: JSON values) with the field table.
 *   specs: name -> field spec (info.fields); settable: names the page can set, in table order;
 *   base: the values the rest is checked against (the form as it is), for the prompt's characters
 *   and for min new tokens <= max new tokens;
 *   context: {choices(name) -> allowed values of a choice field, vocab(dataset) -> characters}.
 * Returns {values, errors}: values holds only the settings that passed, in form shape (stop
 * strings as a list), errors [{field, message}] one per bad setting.
 */
export function checkSettings(raw, { specs, settable, base = {}, context = {} }) {
  const values = {};
  const errors = [];
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    return { values, errors: [{ field: "settings", message: "Settings must be an object of name: value." }] };
  }
  for (const name of Object.keys(raw)) {
    if (!settable.includes(name)) {
      errors.push({
        field: name,
        message: `Unknown setting ${shown(pyRepr(name))}; known settings are ${settable.join(", ")}.`,
      });
    }
  }
  // In table order, so the dataset is known before the prompt's characters are checked.
  for (const name of settable) {
    if (!Object.hasOwn(raw, name)) continue;
    const spec = specs[name];
    const result = checkOne(spec, raw[name], name === "prompt" ? { ...context, dataset: values.dataset ?? base.dataset } : context);
    if (result.error) errors.push({ field: name, message: result.error });
    else values[name] = result.value;
  }
  if ("min_new_tokens" in values || "max_new_tokens" in values) {
    const pair = {
      max_new_tokens: values.max_new_tokens ?? toInt(base.max_new_tokens),
      min_new_tokens: values.min_new_tokens ?? toInt(base.min_new_tokens),
    };
    const together = checkTogether(pair);
    if (together.min_new_tokens) {
      errors.push({ field: "min_new_tokens", message: together.min_new_tokens });
      delete values.min_new_tokens;
      delete values.max_new_tokens;
    }
  }
  return { values, errors };
}

function toInt(value) {
  const x = Number(value);
  return Number.isInteger(x) ? x : undefined;
}

function checkOne(spec, value, context) {
  switch (spec.kind) {
    case "bool": {
      const b = parseBool(value);
      return b === null ? { error: `${spec.label} must be ${spec.allowed}; got ${describeValue(value)}.` } : { value: b };
    }
    case "int":
    case "float":
      if (typeof value !== "string" && typeof value !== "number") {
        return { error: `${spec.label} must be ${spec.allowed}; got ${describeValue(value)}.` };
      }
      return checkField(spec, String(value));
    case "text": {
      if (typeof value !== "string") return { error: `${spec.label} must be text; got ${describeValue(value)}.` };
      const vocab = context.vocab && context.dataset ? context.vocab(context.dataset) : null;
      return checkField(spec, value, { vocab });
    }
    case "lines": {
      const list = typeof value === "string" ? splitLines(value) : value;
      if (!Array.isArray(list) || !list.every((s) => typeof s === "string")) {
        return { error: `${spec.label} must be a list of strings.` };
      }
      const result = checkField(spec, list.filter((s) => s !== "").join("\n"));
      return result;
    }
    case "choice": {
      if (typeof value !== "string") {
        return { error: `${spec.label} must be one of ${choicesOf(spec, context).join(", ")}; got ${describeValue(value)}.` };
      }
      return checkField(spec, value, { choices: choicesOf(spec, context) });
    }
    default:
      return { value };
  }
}

function choicesOf(spec, context) {
  return (context.choices && context.choices(spec.name)) || spec.choices || [];
}

// --- page parameters -----------------------------------------------------------------------

/**
 * The page parameters of a query, checked. panels: the names the page offers; controls: the
 * settings it has controls for (null: not checked here).
 * Returns {view: {theme, panels, controls, run, embed, lazy, hosts, focus}, errors}; controls is
 * null when the link does not limit them.
 */
export function viewFromQuery(values, panels = null, controls = null, questions = null) {
  const view = {
    theme: "auto", panels: null, controls: null, question: null, lms: "none", run: false, embed: false, lazy: "view",
    hosts: [], focus: false,
  };
  const errors = [];
  const one = (name) => {
    const list = values.get(name);
    if (!list) return undefined;
    if (list.length > 1) {
      errors.push({ field: name, message: `${name} is given ${list.length} times in the link; give it once (${VIEW_PARAMS[name]}).` });
      return undefined;
    }
    return list[0];
  };
  const bad = (name, got) => errors.push({ field: name, message: `${name} must be ${VIEW_PARAMS[name]}; got ${shown(pyRepr(got))}.` });

  const theme = one("theme");
  if (theme !== undefined) {
    if (THEMES.includes(theme.trim().toLowerCase())) view.theme = theme.trim().toLowerCase();
    else bad("theme", theme);
  }
  const lazy = one("lazy");
  if (lazy !== undefined) {
    const word = lazy.trim().toLowerCase();
    const asBool = parseBool(word);
    if (LAZY.includes(word)) view.lazy = word;
    else if (asBool === false) view.lazy = "none";
    else if (asBool === true) view.lazy = "view";
    else bad("lazy", lazy);
  }
  for (const name of ["run", "embed", "focus"]) {
    const given = one(name);
    if (given === undefined) continue;
    const b = parseBool(given);
    if (b === null) bad(name, given);
    else view[name] = b;
  }
  const panelList = one("panels");
  if (panelList !== undefined && panels) {
    const asked = panelList.split(",").map((s) => s.trim().toLowerCase()).filter(Boolean);
    const unknown = asked.filter((p) => !panels.includes(p));
    if (unknown.length) {
      errors.push({
        field: "panels",
        message: `panels must be a comma-separated list of ${panels.join(", ")}; got ${unknown.map(pyRepr).join(", ")}.`,
      });
    }
    const known = asked.filter((p) => panels.includes(p));
    if (known.length) view.panels = known;
  }
  const controlList = one("controls");
  if (controlList !== undefined && controls) {
    // top-k, top_k and Top_K all name the setting top_k
    const asked = controlList.split(",").map((s) => s.trim().toLowerCase().replaceAll("-", "_")).filter(Boolean);
    const unknown = asked.filter((c) => !controls.includes(c));
    if (unknown.length) {
      errors.push({
        field: "controls",
        message: `controls must be a comma-separated list of ${controls.join(", ")}; got ${unknown.map(pyRepr).join(", ")}.`,
      });
    }
    const known = [...new Set(asked.filter((c) => controls.includes(c)))];
    if (known.length) view.controls = known;
  }
  const questionList = one("question");
  if (questionList !== undefined && questions) {
    const asked = questionList.split(",").map((s) => s.trim().toLowerCase().replaceAll("-", "_")).filter(Boolean);
    const unknown = asked.filter((q) => !questions.includes(q));
    if (unknown.length || !asked.length) {
      errors.push({
        field: "question",
        message: `question must be one or more of ${questions.join(", ")}, separated by commas; got ${unknown.length ? unknown.map(pyRepr).join(", ") : "nothing"}.`,
      });
    }
    const known = [...new Set(asked.filter((q) => questions.includes(q)))];
    if (known.length) view.question = known;
  }
  const lms = one("lms");
  if (lms !== undefined) {
    const word = lms.trim().toLowerCase().replace("open-edx", "edx").replace("openedx", "edx");
    if (LMS.includes(word)) view.lms = word;
    else bad("lms", lms);
  }
  for (const given of values.get("host") || []) {
    for (const part of given.split(",").map((s) => s.trim()).filter(Boolean)) {
      const origin = originOf(part);
      if (origin) {
        if (!view.hosts.includes(origin)) view.hosts.push(origin);
      } else {
        bad("host", part);
      }
    }
  }
  return { view, errors };
}

/** The origin an allow-list entry names, or null: "https://a.org" and "https://a.org/" are fine. */
export function originOf(text) {
  let url;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return null;
  if (url.username || url.password || url.search || url.hash || (url.pathname !== "/" && url.pathname !== "")) return null;
  return url.origin;
}

/** The theme on <html>: light and dark are forced, auto follows the system. */
export function applyTheme(theme) {
  const root = document.documentElement;
  if (theme === "light" || theme === "dark") root.dataset.theme = theme;
  else delete root.dataset.theme;
}

// --- writing a query -----------------------------------------------------------------------

/** Raw form values by field name (strings; booleans for checkboxes; the stop strings as a list). */
export function readForm(form, names) {
  const out = {};
  for (const name of names) {
    const control = form.elements[name];
    if (!control) continue;
    if (control.type === "checkbox") out[name] = control.checked;
    else if (name === "stop") out[name] = splitLines(control.value);
    else out[name] = control.value;
  }
  return out;
}

/** A query string holding these settings, in table order; extra page parameters go last. */
export function settingsQuery(values, names, extra = {}) {
  const params = new URLSearchParams();
  for (const name of names) {
    if (!(name in values)) continue;
    const value = values[name];
    if (Array.isArray(value)) for (const line of value) params.append(name, line);
    else params.set(name, typeof value === "boolean" ? String(value) : String(value ?? ""));
  }
  for (const [name, value] of Object.entries(extra)) {
    if (value != null) params.set(name, String(value));
  }
  return params.toString();
}

// --- the page ------------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);

/**
 * Wire the URL to the page: apply the settings of the address once Python is ready, keep the
 * address up to date while the learner edits (without adding history entries), and let
 * "Copy link" copy a link that reproduces the run.
 */
export function installUrlState(hooks) {
  const form = $("settings");
  const notice = $("link-notice");
  const copyButton = $("copy-link");
  const linkField = $("share-link");
  const shareStatus = $("share-status");
  const values = queryValues(location.search);
  const panelNames = [...new Set([...document.querySelectorAll("[data-panel]")].map((n) => n.dataset.panel))];
  const controlNames = [...form.querySelectorAll(".field[data-field]")].map((n) => n.dataset.field);
  const { view, errors: viewErrors } = viewFromQuery(values, panelNames, controlNames, hooks.lesson?.questions?.ids);
  applyTheme(view.theme);

  const share = {
    view,
    errors: [], // every problem found in the address, once checked
    applied: null, // the settings the address set, once ready
    settable: () => settableNames(hooks),
    read: () => readForm(form, settableNames(hooks)),
    check: (raw, base) => checkSettings(raw, checkOptions(hooks, base ?? readForm(form, settableNames(hooks)))),
    link: (extra) => pageLink(hooks, extra),
    copyLink,
  };
  hooks.share = share;

  hooks.ready.then(() => {
    const settable = settableNames(hooks);
    const fromQuery = settingsFromQuery(values, settable, specsOf(hooks));
    const checked = checkSettings(fromQuery.raw, checkOptions(hooks, readForm(form, settable)));
    hooks.applySettings(checked.values);
    share.applied = checked.values;
    share.errors = [...viewErrors, ...fromQuery.errors, ...checked.errors];
    showNotice(notice, share.errors, "link");
    if (copyButton) copyButton.disabled = false;
    watchForm();
    // After the other start-up work (an embedded widget first tells its host it is ready).
    if (view.run) queueMicrotask(() => $("generate").click());
  }, () => {});

  // Keep the address (of the full page; an embedded widget keeps its own) and the link field in
  // step with the form, so a reload or a bookmark keeps the settings.
  function watchForm() {
    let timer = null;
    const update = () => {
      if (!view.embed) history.replaceState(history.state, "", pageLink(hooks));
      if (linkField) linkField.value = pageLink(hooks, { run: "true" });
    };
    const later = () => {
      clearTimeout(timer);
      timer = setTimeout(update, 250);
    };
    form.addEventListener("input", later);
    form.addEventListener("change", later);
    $("reset").addEventListener("click", later);
    document.addEventListener("decodelab:run-start", update);
    if (linkField) linkField.value = pageLink(hooks, { run: "true" });
  }

  async function copyLink() {
    const link = pageLink(hooks, { run: "true" });
    if (linkField) linkField.value = link;
    const copied = await copyText(link);
    // Datasets trained here from pasted text are not among those Python started with.
    const shipped = (hooks.info?.fields || []).find((f) => f.name === "dataset")?.choices || [];
    const custom = !shipped.includes(form.elements.dataset.value);
    let words = copied ? "Link copied." : "Copying is blocked here: select the link below and copy it.";
    if (custom) words += " Your own training text stays in this page, so the link cannot bring it along.";
    say(shareStatus, words);
    flash(copyButton, copied ? "Link copied" : "Link below");
    hooks.announce?.(words);
    if (!copied && linkField) {
      linkField.focus();
      linkField.select();
    }
    return link;
  }

  if (copyButton) copyButton.addEventListener("click", () => copyLink());
  return share;
}

function specsOf(hooks) {
  return Object.fromEntries((hooks.info?.fields || []).map((f) => [f.name, f]));
}

// Fields that have a control on this page, in table order.
function settableNames(hooks) {
  const form = $("settings");
  return (hooks.info?.fields || []).map((f) => f.name).filter((name) => form.elements[name]);
}

function checkOptions(hooks, base) {
  const form = $("settings");
  const specs = specsOf(hooks);
  return {
    specs,
    settable: settableNames(hooks),
    base,
    context: {
      choices: (name) => (form.elements[name] && form.elements[name].options
        ? [...form.elements[name].options].map((o) => o.value)
        : null),
      vocab: (dataset) => vocabOf(hooks.info?.datasets?.[dataset]),
    },
  };
}

/** This page with the form's settings in the address (plus the theme, when one is forced). */
export function pageLink(hooks, extra = {}) {
  const form = $("settings");
  const settable = settableNames(hooks);
  const theme = document.documentElement.dataset.theme;
  const query = settingsQuery(readForm(form, settable), settable, { ...(theme ? { theme } : {}), ...extra });
  const url = new URL(location.href);
  url.search = query;
  url.hash = "";
  // An embedded widget shares the full page, which lives beside it.
  url.pathname = url.pathname.replace(/[^/]*$/, "");
  return url.href;
}

/**
 * List problems with given settings in the notice above the run buttons.
 * source: "link" (the page's address) or "host" (settings a host page sent to the widget).
 */
export function showNotice(notice, errors, source = "link") {
  if (!notice) return;
  if (!errors.length) {
    notice.hidden = true;
    notice.replaceChildren();
    return;
  }
  const title = document.createElement("p");
  title.className = "notice-title";
  const where = source === "host" ? "sent by this page" : "in this link";
  title.textContent = errors.length === 1
    ? `One setting ${where} could not be used:`
    : `${errors.length} settings ${where} could not be used:`;
  const list = document.createElement("ul");
  for (const e of errors) {
    const li = document.createElement("li");
    li.textContent = e.message;
    list.append(li);
  }
  const after = document.createElement("p");
  after.textContent = source === "host"
    ? "Those keep their current values; everything else applies."
    : "Those keep their usual values; everything else in the link applies.";
  notice.replaceChildren(title, list, after);
  notice.hidden = false;
}

/** Copy text to the clipboard; false when the browser does not allow it here. */
export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // blocked (for example in an iframe without clipboard-write): try the older way
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "visually-hidden";
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand("copy");
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

function say(node, text) {
  if (node) node.textContent = text;
}

// A button says what happened for a moment, then goes back to its name.
export function flash(button, text, ms = 1800) {
  if (!button) return;
  if (!button.dataset.label) button.dataset.label = button.textContent;
  button.textContent = text;
  clearTimeout(Number(button.dataset.timer));
  button.dataset.timer = String(setTimeout(() => {
    button.textContent = button.dataset.label;
  }, ms));
}
