// The settings as the form holds them, and as Python reads them. Pure: no document, no worker.
//
// The form holds every setting as its control shows it: text for the boxes (a number as typed),
// true or false for a switch, the stop strings as one text with a line each. Python checks that
// raw form (decodelab.fields reads "0.8" as 0.8 and words a mistake as it was typed); nothing
// here decides whether a value is allowed.

/** Stop strings: one per line, empty lines ignored (the box's format, not a rule of stopping). */
export function splitLines(raw) {
  return String(raw ?? "").split(/\r?\n/).filter((line) => line !== "");
}

/** A value as its control shows it: kind is the field's (spec.kind). */
export function formValue(kind, value) {
  if (kind === "bool") return Boolean(value);
  if (kind === "lines") return (Array.isArray(value) ? value : splitLines(value)).join("\n");
  return value == null ? "" : String(value);
}

/** Python's words for the model `id` (setup's models: {id, label, about, pretrained, ...}), or null. */
export function modelOf(info, id) {
  return ((info && info.models) || []).find((m) => m.id === id) || null;
}

/** The real model, read from its file when the learner asks (its entry also has its name and
 * its card's words: {id, name, ...}), or null when Python offers none. */
export function realModel(info) {
  return ((info && info.models) || []).find((m) => m.pretrained) || null;
}

/** Python's defaults of these fields (rows of its field table), as their controls show them. */
export function fieldDefaults(fields, names) {
  const specs = Object.fromEntries((fields || []).map((f) => [f.name, f]));
  return Object.fromEntries(names.map((name) => [name, formValue(specs[name].kind, specs[name].default)]));
}

/** The form's values as a request to Python: the stop strings as a list, the rest as held. */
export function forPython(raw, specs) {
  const out = {};
  for (const [name, value] of Object.entries(raw)) {
    out[name] = specs[name] && specs[name].kind === "lines" ? splitLines(value) : value;
  }
  return out;
}

/** How many of `names` the form holds at other values than their defaults ("More rules (2 changed)"). */
export function countChanged(raw, defaults, names, specs) {
  return names.filter((name) => {
    const now = raw[name];
    const was = defaults[name];
    if (specs[name] && specs[name].kind === "bool") return Boolean(now) !== Boolean(was);
    const text = String(now ?? "").trim();
    return Number.isFinite(Number(text)) && typeof was === "number" ? Number(text) !== was : text !== String(was ?? "");
  }).length;
}

/** The query string of a link to these settings, in the table's order; extra page parameters last. */
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
