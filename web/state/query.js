// The page's address read and checked, without the document: which settings a link gives and
// the parameters that describe the page itself (VIEW_PARAMS). The settings' values are Python's
// to check (state/link.js asks it); what is checked here is the address's own grammar: a name
// given twice, a name that is neither a setting nor a page parameter, and the page parameters.

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

export function shown(text) {
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

// Python's repr() of a short string, enough for messages: 'abc', "it's", '\n'.
export function pyRepr(text) {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = "";
  for (const ch of text) {
    const code = ch.codePointAt(0);
    if (ch === "\\") out += "\\\\";
    else if (ch === quote) out += "\\" + ch;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (code < 0x20 || code === 0x7f) out += "\\x" + code.toString(16).padStart(2, "0");
    else out += ch;
  }
  return quote + out + quote;
}

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
 * twice. `settable` is the list of field names this page has controls for; `panelOwn` the
 * settings a panel's own form reads from the link (the search panels': panelFromQuery).
 */
export function settingsFromQuery(values, settable, specs, panelOwn = []) {
  const raw = {};
  const errors = [];
  for (const [name, list] of values) {
    if (Object.hasOwn(VIEW_PARAMS, name) || panelOwn.includes(name)) continue;
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

/** A panel's own settings in a query: {name: the value as given}, the last of a name given twice
 * (its panel's form shows it; Python checks it, with the rest, when the panel runs). */
export function panelFromQuery(values, names) {
  const out = {};
  for (const name of names) {
    const list = values.get(name);
    if (list && list.length) out[name] = list[list.length - 1];
  }
  return out;
}

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
