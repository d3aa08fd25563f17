// Taking a run away from the page: its trace (JSON, as the command line prints it), the per-step
// probabilities as CSV (built from that trace), and the command line that repeats the run, as
// Python wrote it with the run's start (entry/command.py; or why none can).

import { copyText, flash } from "./copy.js";
import { $, el } from "./dom.js";

// --- CSV -------------------------------------------------------------------------------------

export const CSV_COLUMNS = [
  "step", "phase", "token_id", "token_text", "p_raw", "p_temp", "kept", "p_final", "chosen", "u", "entropy",
  "tokenizer",
];

// RFC 4180: quote a field that holds a comma, quote, line break or edge space; double quotes.
// A token is one character, <eos>, a byte in hex (<e2>), or a BPE token, and BPE merges never
// join punctuation to letters or digits (bpe.split), so a cell can never hold a spreadsheet
// formula: "=" can be a token, "=SUM(A1)" cannot.
function csvField(value) {
  if (value == null) return "";
  const text = typeof value === "number" ? numberText(value) : String(value);
  return /[",\r\n]|^\s|\s$/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

// Shortest text that reads back as the same double (what JSON and Python's repr also give).
function numberText(x) {
  return Number.isFinite(x) ? String(x) : "";
}

/** Rows of {column: value} as CSV, the columns in the order given (other panels' tables too). */
export function csvTable(columns, rows) {
  return [columns.join(","), ...rows.map((row) => columns.map((c) => csvField(row[c])).join(","))].join("\r\n") + "\r\n";
}

/**
 * One row per candidate per step: what the model gave it (p_raw, at T = 1), after temperature
 * (p_temp), whether the filters kept it, its final probability, whether it was chosen, and the
 * step's draw u (empty when greedy) and entropy.
 */
export function traceToCsv(trace) {
  const lines = [CSV_COLUMNS.join(",")];
  for (const step of trace.steps || []) {
    for (const c of step.top || []) {
      const row = {
        step: step.step,
        phase: step.phase,
        token_id: c.token_id,
        token_text: c.token_text,
        p_raw: c.p_raw,
        p_temp: c.p_temp,
        kept: c.kept,
        p_final: c.p_final,
        chosen: c.token_id === step.token_id,
        u: step.u,
        entropy: step.entropy,
        tokenizer: (trace.settings && trace.settings.tokenizer) || "chars",
      };
      lines.push(CSV_COLUMNS.map((name) => csvField(row[name])).join(","));
    }
  }
  return `${lines.join("\r\n")}\r\n`;
}

// --- the page --------------------------------------------------------------------------------

/** A command line in `node`, one box per word, so a narrow screen wraps between options, never inside one. */
export function showWords(node, words) {
  node.replaceChildren(...words.flatMap((word, i) => {
    const box = document.createElement("span");
    box.className = "word";
    box.textContent = word;
    return i ? [" ", box] : [box];
  }));
}

export function download(content, type, filename) {
  const url = URL.createObjectURL(new Blob([content], { type }));
  const link = el("a");
  link.href = url;
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

/** The trace and CSV buttons and the command line, filled after each finished run. */
export function installExports({ store, runs, hooks }) {
  const traceButton = $("export");
  const csvButton = $("export-csv");
  const command = $("command");
  const commandNote = $("command-note");
  const copyButton = $("copy-command");
  const status = $("share-status");
  const exports = { command: null, hasRun: false };
  hooks.exports = exports;

  store.subscribe((change) => {
    if (change.type === "asked" && csvButton) csvButton.disabled = true;
    else if (change.type === "result") finished(change.result || {});
    else if (change.type === "run-start" || change.type === "run-cleared") traceButton.disabled = true;
    else if (change.type === "run-end" && change.run.finish) traceButton.disabled = false;
    else if (change.type === "worker" && change.what === "restarted" && store.state.run) traceButton.disabled = true; // it went with the old worker
    else if (change.type === "worker" && change.what === "restored") traceButton.disabled = false;
  });

  traceButton.addEventListener("click", async () => {
    traceButton.disabled = true;
    try {
      download(await runs.trace(), "application/json", "decodelab-trace.json");
    } catch (err) {
      $("run-meta").textContent = `The trace could not be exported: ${err.message}`;
    } finally {
      traceButton.disabled = false;
    }
  });

  function finished(result) {
    if (result.status === "done") exports.hasRun = true;
    if (csvButton) csvButton.disabled = !exports.hasRun; // a refused run leaves the last one
    if (result.status !== "done") return;
    // Python's command line that repeats the run (entry/command.py), or why there is none
    const { words, note } = result.command || { words: null, note: "" };
    exports.command = words ? words.join(" ") : null;
    showWords(command, words || []);
    copyButton.disabled = !words;
    commandNote.textContent = note;
  }

  csvButton?.addEventListener("click", async () => {
    csvButton.disabled = true;
    try {
      const trace = JSON.parse(await runs.trace());
      if (!trace) throw new Error("there is no finished run yet");
      download(traceToCsv(trace), "text/csv", "decodelab-steps.csv");
    } catch (err) {
      if (status) status.textContent = `The CSV could not be exported: ${err.message}`;
    } finally {
      csvButton.disabled = false;
    }
  });

  copyButton?.addEventListener("click", async () => {
    if (!exports.command) return;
    const copied = await copyText(exports.command);
    flash(copyButton, copied ? "Command copied" : "Select and copy");
    const words = copied ? "Command copied." : "Copying is blocked here: select the command and copy it.";
    if (status) status.textContent = words;
    if (!copied) {
      const range = document.createRange();
      range.selectNodeContents(command);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
    }
  });
  return exports;
}
