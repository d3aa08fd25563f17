// The field table on the page: Python sends it at start-up (info.fields, from decodelab.fields),
// and this module checks the form as the learner types with its rules and its words, and puts
// its ranges and help next to the controls, so nothing here restates a limit. A message always
// names the field, what is allowed, and what it got:
//   "Top-p must be a number greater than 0 and at most 1 (1 means off); got 1.5."

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

function bad(spec, got) {
  return { error: `${spec.label} must be ${spec.allowed}; got ${got}.` };
}

function checkNumber(spec, raw, badInput) {
  const text = String(raw ?? "").trim();
  if (badInput) return bad(spec, "something that is not a number");
  if (text === "") return spec.optional ? { value: null } : bad(spec, "nothing");
  const x = Number(text);
  if (!/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(text) || !Number.isFinite(x)) {
    return bad(spec, shown(pyRepr(text)));
  }
  if (spec.kind === "int" && !Number.isInteger(x)) return bad(spec, shown(text));
  const tooLow = spec.min_exclusive ? x <= spec.min : x < spec.min;
  const tooHigh = spec.max != null && (spec.max_exclusive ? x >= spec.max : x > spec.max);
  if ((spec.min != null && tooLow) || tooHigh) return bad(spec, shown(text));
  return { value: x };
}

/** The characters a dataset's model knows ({chars, words}: the list, and Python's words for it). */
export function vocabOf(datasetInfo) {
  const d = datasetInfo;
  return d && Array.isArray(d.vocab) ? { chars: d.vocab.filter((t) => t !== "<eos>"), words: d.vocab_words } : null;
}

function byCodePoint(a, b) {
  return a.codePointAt(0) - b.codePointAt(0);
}

function checkText(spec, raw, vocab) {
  const text = String(raw ?? "");
  const length = [...text].length;
  if (spec.max_chars != null && length > spec.max_chars) {
    return { error: `${spec.label} must be at most ${spec.max_chars} characters; got ${length}.` };
  }
  if (vocab) {
    const known = new Set(vocab.chars);
    const unknown = [...new Set([...text].filter((c) => !known.has(c)))].sort(byCodePoint);
    if (unknown.length) {
      const list = unknown.slice(0, 12).map(pyRepr).join(" ") + (unknown.length > 12 ? " ..." : "");
      return { error: `${spec.label} has characters this model has never seen: ${list}. Use only: ${vocab.words}.` };
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
  if (lines.length > spec.max_items) {
    return { error: `${spec.label}: at most ${spec.max_items} are allowed; got ${lines.length}.` };
  }
  if (lines.length < spec.min_items) {
    return { error: `${spec.label}: at least ${spec.min_items} are needed, one per line; got ${lines.length}.` };
  }
  for (let i = 0; i < lines.length; i++) {
    const n = [...lines[i]].length;
    if (n < spec.min_chars || n > spec.max_chars) {
      return { error: `${spec.label}: entry ${i + 1} has ${n} characters; each must have ${spec.min_chars} to ${spec.max_chars}.` };
    }
  }
  return { value: lines };
}

/**
 * Check one field's raw value from the form.
 * spec: one entry of info.fields; raw: the control's value (string, or boolean for a checkbox);
 * ctx: {badInput, vocab (vocabOf: the characters the model knows), choices}.
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

/**
 * Put the table's ranges and help next to the page's controls: every control with a field name
 * (data-field, or the name of a settings control) gets its min and max, and its hint
 * (#<id>-hint) gets the field's help where it has data-help, and its allowed values in words
 * wherever it holds a <span class="allowed">. An empty text control gets the field's default.
 */
export function describeControls(root, specs) {
  for (const control of root.querySelectorAll(":is(input, select, textarea)[data-field], #settings [name]")) {
    const spec = specs[control.dataset.field || control.name];
    if (!spec) continue;
    if (control.type === "number") {
      if (spec.min != null) control.min = spec.min;
      if (spec.max != null) control.max = spec.max;
    }
    if (control.value === "" && control.tagName !== "SELECT" && (typeof spec.default === "number" || typeof spec.default === "string")) {
      control.value = String(spec.default);
    }
    const hint = root.querySelector(`#${control.id}-hint`);
    if (!hint) continue;
    if (hint.hasAttribute("data-help")) hint.textContent = spec.help;
    for (const span of hint.querySelectorAll(".allowed")) {
      span.textContent = spec.allowed.charAt(0).toUpperCase() + spec.allowed.slice(1);
    }
  }
}
