// Taking a search away from the page: its trace (JSON, as `generate --json` prints it), a CSV
// (beam search: one row per candidate per step; speculative decoding: one row per token of
// every round), the command line that repeats it, and a link to the page with the workbench's
// settings and the panel's own. Both panels use it.

import { fate } from "./tree.js";
import { csvTable, download, showWords } from "../ui/exports.js";
import { copyText, flash } from "../ui/copy.js";
import { $ } from "../ui/dom.js";

export const BEAM_COLUMNS = ["step", "beam", "token_id", "token_text", "score", "finished", "what_happened"];
export const ROUND_COLUMNS = ["round", "position", "token_id", "token_text", "p", "q", "ratio", "u", "accepted", "source"];

/** The CSV of a search's trace: beam search's candidates, or speculative decoding's rounds. */
export function searchCsv(trace) {
  if (trace.strategy === "beam") {
    return csvTable(BEAM_COLUMNS, trace.steps.flatMap((step) => step.candidates.map((c) => ({
      step: step.step, beam: c.beam, token_id: c.token_id, token_text: c.token_text, score: c.score,
      finished: c.finished, what_happened: fate(c, step),
    }))));
  }
  const rows = [];
  trace.rounds.forEach((r, i) => {
    r.tokens.forEach((t, j) => rows.push({ round: i, position: j, ...t, source: "draft" }));
    const extra = "resampled" in r ? "resampled" : "bonus";
    const token = trace.steps.find((s) => s.round === i && s.source === extra);
    if (token) rows.push({ round: i, position: r.tokens.length, token_id: token.token_id, token_text: token.token_text, accepted: true, source: extra });
  });
  return csvTable(ROUND_COLUMNS, rows);
}

/**
 * The buttons and the command line of a panel: ids prefix-export, prefix-export-csv,
 * prefix-command (and its note: how to run it), prefix-link (a link with the panel's own settings, own(), opening at anchor).
 */
export function installSearchExports(prefix, app, own, anchor) {
  let trace = null;
  const json = $(`${prefix}-export`);
  const csv = $(`${prefix}-export-csv`);
  const command = $(`${prefix}-command`);
  const note = $(`${prefix}-command-note`);
  const link = $(`${prefix}-link`);
  link.addEventListener("click", async () => {
    const url = `${app.link(own())}#${anchor}`;
    link.dataset.link = url; // the last link copied (or offered), for whoever reads the page
    const copied = await copyText(url);
    flash(link, copied ? "Link copied" : "Copying is blocked");
  });
  json.addEventListener("click", () => trace && download(JSON.stringify(trace), "application/json", `decodelab-${trace.strategy}.json`));
  csv.addEventListener("click", () => trace && download(searchCsv(trace), "text/csv", `decodelab-${trace.strategy}.csv`));
  return {
    /** A finished search: its trace and Python's command line that repeats it. */
    show(next, repeat) {
      trace = next;
      json.disabled = csv.disabled = false;
      showWords(command, repeat.words || []); // (none for a search on text of one's own)
      note.textContent = repeat.note;
    },
  };
}
