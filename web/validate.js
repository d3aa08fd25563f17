// Instant checks of the settings form, driven by the field table that Python sends at start-up
// (info.fields), so the rules and the wording match what Python says when it checks again.
// A message always names the field, what is allowed, and what it got:
//   "Top-p must be a number greater than 0 and at most 1 (1 means off); got 1.5."

const MAX_TEXT_CHARS = 2000;
const MAX_STOP_STRINGS = 32;
const MAX_STOP_CHARS = 100;

// Python's str() of a number as it appears in messages: 1.0 -> "1", 0.5 -> "0.5".
function num(x) {
  return String(Number(x));
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

function shown(text) {
  return text.length <= 40 ? text : text.slice(0, 37) + "...";
}

// The allowed values in words (Python sends this as spec.allowed; the fallback mirrors it).
export function allowedText(spec) {
  if (spec.allowed) return spec.allowed;
  if (spec.kind === "int" || spec.kind === "float") {
    const noun = spec.kind === "int" ? "a whole number" : "a number";
    const lo = spec.min_exclusive ? `greater than ${num(spec.min)}` : `from ${num(spec.min)}`;
    const hi = spec.min_exclusive ? `and at most ${num(spec.max)}` : `to ${num(spec.max)}`;
    const note = spec.note ? ` (${spec.note})` : "";
    return `${noun} ${lo} ${hi}${note}`;
  }
  if (spec.kind === "choice") return "one of " + (spec.choices || []).join(", ");
  return "";
}

function bad(spec, got) {
  return { error: `${spec.label} must be ${allowedText(spec)}; got ${got}.` };
}

function checkNumber(spec, raw, badInput) {
  const text = String(raw ?? "").trim();
  if (badInput) return bad(spec, "something that is not a number");
  if (text === "") return bad(spec, "nothing");
  const x = Number(text);
  if (!/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(text) || !Number.isFinite(x)) {
    return bad(spec, shown(pyRepr(text)));
  }
  if (spec.kind === "int" && !Number.isInteger(x)) return bad(spec, shown(text));
  const tooLow = spec.min_exclusive ? x <= spec.min : x < spec.min;
  if ((spec.min != null && tooLow) || (spec.max != null && x > spec.max)) return bad(spec, shown(text));
  return { value: x };
}

// Characters described the way Python describes them: "a-z, A-Z, space, ' and -".
export function describeChars(chars) {
  const rest = new Set(chars);
  const parts = [];
  for (const [letters, name] of [["abcdefghijklmnopqrstuvwxyz", "a-z"], ["ABCDEFGHIJKLMNOPQRSTUVWXYZ", "A-Z"], ["0123456789", "0-9"]]) {
    if ([...letters].every((c) => rest.has(c))) {
      parts.push(name);
      for (const c of letters) rest.delete(c);
    }
  }
  const named = { " ": "space", "\n": "newline", "\t": "tab" };
  let others = [...rest].sort(byCodePoint).map((c) => named[c] || c);
  if (others.length > 20) others = others.slice(0, 20).concat(["..."]);
  const all = parts.concat(others);
  return all.length ? all.join(", ") : "(nothing)";
}

function byCodePoint(a, b) {
  return a.codePointAt(0) - b.codePointAt(0);
}

function checkText(spec, raw, vocab) {
  const text = String(raw ?? "");
  const length = [...text].length;
  if (length > MAX_TEXT_CHARS) {
    return { error: `${spec.label} must be at most ${MAX_TEXT_CHARS} characters; got ${length}.` };
  }
  if (vocab && spec.name === "prompt") {
    const known = new Set(vocab);
    const unknown = [...new Set([...text].filter((c) => !known.has(c)))].sort(byCodePoint);
    if (unknown.length) {
      const list = unknown.slice(0, 12).map(pyRepr).join(" ") + (unknown.length > 12 ? " ..." : "");
      return { error: `Prompt has characters this model has never seen: ${list}. Use only: ${describeChars(vocab.join(""))}.` };
    }
  }
  return { value: text };
}

// Stop strings: one per line, empty lines ignored.
export function splitLines(raw) {
  return String(raw ?? "").split(/\r?\n/).filter((line) => line !== "");
}

function checkLines(spec, raw) {
  const lines = splitLines(raw);
  if (lines.length > MAX_STOP_STRINGS) {
    return { error: `${spec.label}: at most ${MAX_STOP_STRINGS} are allowed; got ${lines.length}.` };
  }
  for (let i = 0; i < lines.length; i++) {
    const n = [...lines[i]].length;
    if (n > MAX_STOP_CHARS) {
      return { error: `${spec.label}: entry ${i + 1} has ${n} characters; each must have 1 to ${MAX_STOP_CHARS}.` };
    }
  }
  return { value: lines };
}

/**
 * Check one field's raw value from the form.
 * spec: one entry of info.fields; raw: the control's value (string, or boolean for a checkbox);
 * ctx: {badInput, vocab (characters the model knows, without end-of-sequence), choices}.
 * Returns {value} or {error: "sentence"}.
 */
export function checkField(spec, raw, ctx = {}) {
  switch (spec.kind) {
    case "int":
    case "float":
      return checkNumber(spec, raw, ctx.badInput);
    case "bool":
      return { value: Boolean(raw) };
    case "text":
      return checkText(spec, raw, ctx.vocab);
    case "lines":
      return checkLines(spec, raw);
    case "choice": {
      const choices = ctx.choices || spec.choices || [];
      const value = String(raw ?? "");
      if (!choices.includes(value)) {
        return { error: `${spec.label} must be one of ${choices.join(", ")}; got ${shown(pyRepr(value))}.` };
      }
      return { value };
    }
    default:
      return { value: raw };
  }
}

/** Checks that involve two fields at once (run after each field is fine on its own). */
export function checkTogether(values) {
  const errors = {};
  if (Number.isInteger(values.min_new_tokens) && Number.isInteger(values.max_new_tokens)
      && values.min_new_tokens > values.max_new_tokens) {
    errors.min_new_tokens = `Min new tokens must be from 0 to Max new tokens (${values.max_new_tokens}); got ${values.min_new_tokens}.`;
  }
  return errors;
}
