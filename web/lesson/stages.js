// The stages of one decision, drawn: every stage the decoding rules pass the candidates through,
// as one table (rows: candidates, columns: stages, each cell a bar and its number), a numbered
// list saying in words what each stage did, and the draw. Python computes every number
// (decodelab.lesson.pipeline); this module only lays them out. Model and user text goes into
// the page through textContent only.
//
// Used twice: for the selected step of a run (pipeline.js) and by the playground, which shows
// typed numbers the same way.

import { el, fillDrawStrip, fixed, pct, plural, readable, spoken, tableHead } from "../ui/render.js";

const ORDER_WORDS = {
  "temperature-first": "temperature-first",
  "filter-first": "filter-first",
};

function logit(x) {
  return x == null ? "−∞" : fixed(x, 2).replace("-", "−");
}

// The small line under a column title: the number that drives the stage.
function stageSub(stage) {
  switch (stage.kind) {
    case "softmax": return "T = 1";
    case "temperature": return stage.last ? `T = ${num(stage.T)}, last` : `T = ${num(stage.T)}`;
    case "top_k": return `k = ${stage.k}`;
    case "top_p": return `p = ${num(stage.top_p)}`;
    case "min_p": return `≥ ${pct(stage.cutoff)}`;
    case "typical_p": return `p = ${num(stage.typical_p)}, H = ${fixed(stage.entropy, 2)}`;
    case "greedy": return "argmax";
    default: return "";
  }
}

function num(x) {
  return String(Number(x));
}

function bar(p, kind) {
  const track = el("span", `pl-bar ${kind || ""}`.trim());
  const fill = el("span", "pl-fill");
  fill.style.setProperty("--w", `${Math.max(0, Math.min(1, p || 0)) * 100}%`);
  track.append(fill);
  return track;
}

/** One table cell: a bar and a number, or a mark for "cut here" / "already gone". */
function valueCell(p, { kind = "", state = "alive", extra = null } = {}) {
  const td = el("td", `pl-cell is-${state}`);
  if (state === "gone") {
    td.append(el("span", "pl-gone", "–"));
    td.setAttribute("aria-label", "already removed");
    return td;
  }
  const line = el("div", "pl-line");
  line.append(bar(p, kind));
  if (state === "removed") { // the final column: not in the draw
    const n = el("span", "pl-n");
    n.append(el("span", "pl-x", "✕ "), "removed");
    line.append(n);
    td.append(line);
  } else if (state === "cut") {
    const n = el("span", "pl-n");
    n.append(el("span", "pl-x", "✕ "), el("s", null, pct(p)));
    line.append(n);
    td.append(line, el("span", "pl-cut-word", "cut"));
  } else {
    line.append(el("span", "pl-n", pct(p)));
    td.append(line);
  }
  if (extra) td.append(...[].concat(extra));
  return td;
}

function columnHead(index, title, sub) {
  const th = el("th");
  th.append(el("span", "pl-step", String(index)), el("span", "pl-title", title));
  if (sub) th.append(el("span", "pl-sub", sub));
  return th;
}

/** The state of row i at a stage, as the table draws it. */
function cellFor(stage, i, rowsCount) {
  const kind = stage.kind;
  if (kind === "softmax") return valueCell(stage.p[i], { kind: "raw" });
  if (kind === "temperature" && !stage.last) return valueCell(stage.p[i], { kind: "temp" });
  if (kind === "temperature") { // filter-first: temperature on what the filters kept
    return stage.kept[i] ? valueCell(stage.p_in[i], { kind: "temp" }) : valueCell(0, { state: "gone" });
  }
  if (kind === "greedy") {
    return stage.kept[i] ? valueCell(1, { kind: "final" }) : valueCell(0, { state: "gone" });
  }
  // a filter: what it saw, and whether it cut the row
  const alive = stage.kept[i] || stage.removed[i];
  if (!alive) return valueCell(0, { state: "gone" });
  let extra = null;
  if (kind === "top_p" || kind === "typical_p") {
    extra = el("span", "pl-cum", `Σ ${pct(stage.cum[i])}`);
    if (stage.crossing_row === i) {
      const tag = el("span", "pl-tag", `reaches ${num(stage[kind])}`);
      extra = [extra, tag];
    }
  }
  if (kind === "top_k" && stage.cut_after === i) extra = el("span", "pl-tag", `k-th ${pct(stage.kth)}`);
  const td = valueCell(stage.p_in[i], { kind: stage.removed[i] ? "" : "temp", state: stage.removed[i] ? "cut" : "alive", extra });
  if (stage.cut_after === i && i < rowsCount - 1) td.classList.add("pl-cut-below");
  return td;
}

function restCell(stage) {
  const kind = stage.kind;
  if (kind === "softmax" || (kind === "temperature" && !stage.last)) return el("td", "pl-rest", pct(stage.rest_p));
  if (kind === "temperature" || kind === "greedy") return el("td", "pl-rest", stage.rest_kept ? pct(stage.rest_p) : "–");
  const parts = [];
  if (stage.rest_removed) parts.push(`${stage.rest_removed} cut`);
  if (stage.rest_kept) parts.push(`${stage.rest_kept} kept`);
  return el("td", "pl-rest", parts.join(", ") || "–");
}

function buildTable(data, pipe, caption) {
  const { rows } = data;
  const table = el("table", "pl-table");
  table.append(el("caption", null, caption));
  let n = 1;
  const heads = [el("th", "pl-corner", "Candidate"), columnHead(n++, "Logit", "model")];
  if (data.adjusted) heads.push(columnHead(n++, "Adjusted", adjustedWhy(data)));
  for (const stage of pipe.stages) heads.push(columnHead(n++, stage.title, stageSub(stage)));
  heads.push(columnHead(n, "Final", data.greedy ? "no draw" : "renormalised"));
  const thead = tableHead(heads);
  const tbody = el("tbody");
  rows.forEach((row, i) => {
    const chosen = row.token_id === data.token_id;
    const removed = !pipe.final.kept[i];
    const tr = el("tr");
    if (chosen) tr.classList.add("is-chosen");
    if (removed) tr.classList.add("is-out");
    const th = el("th", "pl-tok");
    th.scope = "row";
    th.append(el("span", "pl-mark", chosen ? "▸" : ""), el("span", "pl-label", readable(row.token_text)));
    if (chosen) th.append(el("span", "pl-badge", "chosen"));
    tr.append(th, el("td", "pl-logit", logit(data.logits[i])));
    if (data.adjusted) tr.append(el("td", "pl-logit", logit(data.adjusted[i])));
    for (const stage of pipe.stages) tr.append(cellFor(stage, i, rows.length));
    tr.append(valueCell(pipe.final.p[i], removed ? { state: "removed" } : { kind: "final" }));
    tbody.append(tr);
  });
  table.append(thead, tbody);
  const others = data.vocab_size - rows.length;
  if (others > 0) {
    const tr = el("tr", "pl-others");
    const th = el("th", "pl-tok", `+ ${others} more`);
    th.scope = "row";
    tr.append(th, el("td", "pl-rest", "lower"));
    if (data.adjusted) tr.append(el("td", "pl-rest", ""));
    for (const stage of pipe.stages) tr.append(restCell(stage));
    tr.append(el("td", "pl-rest", pipe.final.rest_kept ? `${pct(pipe.final.rest_p)} (${pipe.final.rest_kept} kept)` : "none kept"));
    const tfoot = el("tfoot");
    tfoot.append(tr);
    table.append(tfoot);
  }
  return table;
}

function adjustedWhy(data) {
  const why = [];
  if (data.mask) why.push(data.mask.kind === "json" ? "JSON grammar" : "healing mask");
  if (data.eos_blocked) why.push("EOS blocked");
  if (data.penalty != null && data.penalty !== 1) why.push(`penalty ${num(data.penalty)}`);
  return why.join(", ") || "adjusted";
}

// --- the stages in words ----------------------------------------------------------------------

function top(data, stage, count = 2) {
  // the likeliest rows of a stage, "“a” 34.2%, “e” 20.1%"
  const pairs = data.rows.map((r, i) => [r, stage.p[i]]).filter(([, p]) => p > 0);
  pairs.sort((a, b) => b[1] - a[1]);
  return pairs.slice(0, count).map(([r, p]) => `${spoken(r.token_text)} ${pct(p)}`).join(", ");
}

function stageSentences(data, pipe, noun) {
  const out = [];
  const V = data.vocab_size;
  const best = data.logits.reduce((b, x, i) => (x != null && (b < 0 || x > data.logits[b]) ? i : b), -1);
  out.push(`Logits: the model gives each of the ${V} ${noun}s a score. The highest is ${logit(data.logits[best])}, for ${spoken(data.rows[best].token_text)}. Scores can be negative and do not add up to anything.`);
  if (data.mask && data.mask.kind === "json") {
    const m = data.mask;
    const likely = (m.likely || []).map((r) => `${spoken(r.token_text)} ${pct(r.p)}`).join(", ");
    out.push(`Masked by the JSON grammar: only ${plural(m.kept_count, noun, `${noun}s`)} can continue a JSON object from the answer so far. The other ${m.removed_count} cannot, so their logits become −∞; the model had given them ${pct(m.p_removed)} together${likely ? ` (the likeliest: ${likely})` : ""}, and what is left is renormalised before temperature and the filters.`);
  } else if (data.mask) {
    const m = data.mask;
    out.push(`Masked: token healing allows only the ${plural(m.kept_count, `${noun} that starts`, `${noun}s that start`)} with the text taken back from the prompt. The other ${m.removed_count} ${m.why.replace(/^does not/, "do not")}, so their logits become −∞; the model had given them ${pct(m.p_removed)} together, and the rest is renormalised.`);
  }
  if (data.adjusted) {
    const bits = [];
    if (data.eos_blocked) bits.push("end-of-sequence is blocked (its logit becomes −∞)");
    if (data.penalty != null && data.penalty !== 1) bits.push(`the repetition penalty ${num(data.penalty)} marks down every ${noun} already used: positive logits are divided by it, negative ones multiplied`);
    if (bits.length) out.push(`Adjusted: before any rule, ${bits.join(", and ")}.`);
  }
  let before = null;
  for (const stage of pipe.stages) {
    switch (stage.kind) {
      case "softmax":
        out.push(`Softmax at T = 1 turns the scores into probabilities that add up to 100%: ${top(data, stage)}. This is what the model itself believes.`);
        break;
      case "temperature": {
        const T = Number(stage.T);
        const effect = T < 1 ? "sharpens the distribution: the favourite gains" : T > 1 ? "flattens the distribution: the favourite loses, the rest gain" : "leaves it as it is";
        if (stage.last) {
          out.push(`Temperature T = ${num(T)} comes last here: the logits of the ${plural(stage.kept_count, "candidate", "candidates")} still kept are divided by ${num(T)}, which ${effect}.`);
        } else {
          const i = data.rows.findIndex((r, j) => before && before.p[j] === Math.max(...before.p));
          const change = i >= 0 && T !== 1 ? ` ${spoken(data.rows[i].token_text)} goes from ${pct(before.p[i])} to ${pct(stage.p[i])}.` : "";
          out.push(`Temperature divides every logit by T = ${num(T)}, which ${effect}.${change}`);
        }
        break;
      }
      case "top_k": {
        const ties = stage.kept_count > stage.k ? ` (${stage.kept_count} kept: ties with the k-th stay)` : "";
        out.push(`Top-k ${stage.k} keeps everything at least as likely as the ${ordinal(stage.k)} likeliest (${pct(stage.kth)})${ties}: ${stage.removed_count ? `${stage.removed_count} removed` : "nothing removed"}.`);
        break;
      }
      case "top_p":
        out.push(`Top-p ${num(stage.top_p)} adds up the likeliest, in order, until the total reaches ${pct(stage.top_p)}: after ${plural(stage.crossing_rank, "candidate", "candidates")} it is ${pct(stage.reached)}. The one that crosses the line${stage.crossing_row != null ? `, ${spoken(data.rows[stage.crossing_row].token_text)},` : ""} is kept; ${stage.removed_count ? `${stage.removed_count} removed` : "nothing removed"}.`);
        break;
      case "min_p":
        out.push(`Min-p ${num(stage.min_p)} removes what is below ${num(stage.min_p)} × ${pct(stage.p_max)} = ${pct(stage.cutoff)}: ${stage.removed_count ? `${stage.removed_count} removed` : "nothing removed"}.`);
        break;
      case "typical_p":
        out.push(`Typical-p ${num(stage.typical_p)} compares each ${noun}'s surprise, −ln p, with the entropy H = ${fixed(stage.entropy, 2)} nats (the average surprise), and adds up the nearest first until the total reaches ${pct(stage.typical_p)}: after ${plural(stage.crossing_rank, "candidate", "candidates")} it is ${pct(stage.reached)}. The one that crosses the line${stage.crossing_row != null ? `, ${spoken(data.rows[stage.crossing_row].token_text)},` : ""} is kept; ${stage.removed_count ? `${stage.removed_count} removed` : "nothing removed"}, however likely.`);
        break;
      case "greedy":
        out.push(`Greedy takes the likeliest ${noun}, ${spoken(data.token_text)}, with no random draw. (A tie would go to the lowest id.)`);
        break;
      default:
        break;
    }
    before = stage;
  }
  const active = pipe.stages.some((s) => s.filter);
  if (!data.greedy) {
    const off = `No filter is on (${listed(data.filters)} are off)`;
    if (!active) out.push(data.mask ? `${off}, so the ${data.mask.kept_count} the mask left all stay in the draw.` : `${off}, so all ${V} stay in the draw.`);
    else out.push(`Renormalised: the ${plural(pipe.final.kept_count, "candidate", "candidates")} left are scaled up to add up to 100% again.`);
  }
  return out;
}

// ["a", "b", "c"] -> "a, b and c"
function listed(words) {
  return words.length < 2 ? words.join("") : `${words.slice(0, -1).join(", ")} and ${words[words.length - 1]}`;
}

function ordinal(n) {
  const s = ["th", "st", "nd", "rd"];
  const v = n % 100;
  return `${n}${s[(v - 20) % 10] || s[v] || s[0]}`;
}

// --- the draw -------------------------------------------------------------------------------------

function buildDraw(data, prefix) {
  const draw = data.draw;
  const figure = el("figure", "pl-draw");
  const caption = el("figcaption");
  const n = draw.segments.length + draw.segments_cut;
  caption.append(
    el("strong", null, `The draw: u = ${fixed(draw.u, 4)}. `),
    `The ${plural(n, "kept candidate is", "kept candidates are")} laid end to end in id order, each as long as its final probability. u lands in [${fixed(draw.lo, 4)}, ${fixed(draw.hi, 4)}), the stretch of ${spoken(draw.token_text)}, so ${spoken(draw.token_text)} is chosen.`,
  );
  const widest = draw.segments.reduce((a, b) => (b.hi - b.lo > a.hi - a.lo ? b : a), draw.segments[0]);
  if (widest && widest.token_id !== draw.token_id) {
    caption.append(` It was not the likeliest (${spoken(widest.token_text)} was): a draw picks each candidate as often as its probability, so ${spoken(draw.token_text)} wins ${pct(draw.hi - draw.lo)} of the time.`);
  }
  const strip = fillDrawStrip(el("div", "draw-strip"), draw.segments.map((seg) => (
    { width: seg.hi - seg.lo, label: seg.token_text, chosen: seg.token_id === draw.token_id })), draw.u);
  strip.setAttribute("aria-hidden", "true");
  const scale = el("div", "draw-scale");
  scale.setAttribute("aria-hidden", "true");
  scale.append(el("span", null, "0"), el("span", null, "1"));

  // the same intervals as a table
  const details = el("details", "pl-intervals");
  details.append(el("summary", null, "The intervals as a table"));
  const wrap = el("div", "table-wrap");
  const table = el("table", "data-table pl-itable");
  table.append(el("caption", null, `Each kept candidate’s stretch of [0, 1); u = ${fixed(draw.u, 4)}`));
  const thead = tableHead(["Candidate", "From", "To", "Holds u?"]);
  const tbody = el("tbody");
  for (const seg of draw.segments) {
    const tr = el("tr");
    const hit = seg.token_id === draw.token_id;
    if (hit) tr.className = "is-chosen";
    const th = el("th", null, readable(seg.token_text));
    th.scope = "row";
    tr.append(th, el("td", null, fixed(seg.lo, 4)), el("td", null, fixed(seg.hi, 4)), el("td", null, hit ? "yes: chosen" : ""));
    tbody.append(tr);
  }
  table.append(thead, tbody);
  wrap.append(table);
  details.append(wrap);
  if (draw.segments_cut) details.append(el("p", "pl-note", `The table lists the first ${draw.segments.length} of ${n}.`));
  figure.id = `${prefix}-draw`;
  figure.append(caption, strip, scale, details);
  return figure;
}

// --- the two orders ---------------------------------------------------------------------------------

function buildOrders(data, shown, onPick, prefix, used) {
  const box = el("div", data.orders_differ ? "pl-orders differ" : "pl-orders");
  const tf = data.pipelines["temperature-first"].final;
  const ff = data.pipelines["filter-first"].final;
  const says = el("p", "pl-orders-say");
  if (data.orders_differ) {
    says.append(el("strong", null, "The two orders disagree here. "),
      `Temperature-first keeps ${tf.kept_count}; filter-first keeps ${ff.kept_count}. ${used.sentence} ${data.order}.`);
  } else {
    says.textContent = `Both orders keep the same ${plural(tf.kept_count, "candidate", "candidates")} here, so they give the same result. ${used.sentence} ${data.order}.`;
  }
  const group = el("fieldset", "pl-toggle row");
  group.append(el("legend", null, "Show the stages of"));
  for (const order of ["temperature-first", "filter-first"]) {
    const id = `${prefix}-order-${order}`;
    const input = el("input");
    input.type = "radio";
    input.name = `${prefix}-order`;
    input.id = id;
    input.value = order;
    input.checked = order === shown;
    input.addEventListener("change", () => onPick(order));
    const label = el("label", null, ORDER_WORDS[order] + (order === data.order ? ` (${used.mark})` : ""));
    label.htmlFor = id;
    const span = el("span", "pl-choice");
    span.append(input, label);
    group.append(span);
  }
  box.append(says, group);
  if (data.orders_differ) {
    const differing = data.rows.map((row, i) => i).filter((i) => tf.kept[i] !== ff.kept[i]);
    const gap = Math.abs(tf.kept_count - ff.kept_count);
    const both = Math.min(tf.kept_count, ff.kept_count);
    const note = el("p", "pl-orders-note");
    if (differing.length) {
      const wrap = el("div", "table-wrap");
      const table = el("table", "data-table pl-compare");
      table.append(el("caption", null, "Where they disagree: final probabilities"));
      const thead = tableHead(["Candidate", "temperature-first", "filter-first"]);
      const tbody = el("tbody");
      for (const i of differing) {
        const tr = el("tr", "is-different");
        const th = el("th", "st-mono", readable(data.rows[i].token_text));
        th.scope = "row";
        tr.append(th);
        for (const f of [tf, ff]) tr.append(f.kept[i] ? el("td", null, pct(f.p[i])) : el("td", "is-cut", "✕ removed"));
        tbody.append(tr);
      }
      table.append(thead, tbody);
      wrap.append(table);
      box.append(wrap);
      box.classList.add("has-table");
      const unseen = gap - differing.length;
      note.textContent = `Both keep the ${both} likeliest${unseen > 0 ? `; ${plural(unseen, "more candidate they disagree on is", "more candidates they disagree on are")} further down the list` : ""}.`;
    } else {
      note.textContent = `Both keep the ${both} likeliest; the ${plural(gap, "candidate", "candidates")} they disagree on ${gap === 1 ? "is" : "are"} less likely than the ${data.rows.length} shown.`;
    }
    box.insertBefore(note, group);
  }
  return box;
}

// --- the view -----------------------------------------------------------------------------------------

/**
 * Draws one explanation (the JSON of decodelab.lesson.pipeline.explain) into `root`.
 * options: prefix (unique id prefix), noun ("character" or "candidate"), caption(data) -> text.
 */
export class PipelineView {
  constructor(root, { prefix, noun = "candidate", caption = () => "The candidates at each stage", used = { sentence: "This run used", mark: "used" } }) {
    this.root = root;
    this.used = used;
    this.prefix = prefix;
    this.noun = noun;
    this.caption = caption;
    this.data = null;
    this.shown = null;
  }

  show(data) {
    const keepOrder = this.data && this.shown && data.pipelines[this.shown] && this.data.order === data.order && this.shown !== data.order;
    this.data = data;
    this.shown = keepOrder ? this.shown : data.order;
    this.render();
  }

  render() {
    const data = this.data;
    const pipe = data.pipelines[this.shown];
    const parts = [];
    const filtering = pipe.stages.some((s) => s.filter);
    if (filtering && data.pipelines["filter-first"] && data.pipelines["temperature-first"]) {
      parts.push(buildOrders(data, this.shown, (order) => {
        this.shown = order;
        this.render();
        const radio = document.getElementById(`${this.prefix}-order-${order}`);
        if (radio) radio.focus();
      }, this.prefix, this.used));
    }
    const legend = el("p", "pl-legend");
    legend.setAttribute("aria-hidden", "true");
    legend.append(
      el("span", "pl-key alive", "kept"),
      el("span", "pl-key cut", "✕ cut at this stage"),
      el("span", "pl-key gone", "– removed earlier"),
      el("span", "pl-key chosen", "▸ chosen"),
    );
    const wrap = el("div", "table-wrap pl-wrap");
    wrap.tabIndex = 0; // scrollable on a narrow screen: reachable by keyboard
    wrap.setAttribute("role", "group");
    wrap.setAttribute("aria-label", "Stages table (scrolls sideways on narrow screens)");
    wrap.append(buildTable(data, pipe, this.caption(data, this.shown)));
    const list = el("ol", "pl-stages");
    const noun = data.tokenizer === "bpe" ? "token" : this.noun;
    for (const sentence of stageSentences(data, pipe, noun)) list.append(el("li", null, sentence));
    const main = el("div", "pl-main");
    main.append(legend, el("p", "pl-scroll-hint", "Scroll the table sideways to see every stage →"), wrap);
    const side = el("div", "pl-side");
    side.append(list);
    if (data.draw && this.shown === data.order) side.append(buildDraw(data, this.prefix));
    else if (data.draw) side.append(el("p", "pl-note", `The draw belongs to the order in use (${data.order}); switch back to see it.`));
    else if (!data.greedy) side.append(el("p", "pl-note", "No draw: give u a value to see which candidate it would pick."));
    parts.push(main, side);
    const columns = 3 + pipe.stages.length + (data.adjusted ? 1 : 0);
    this.root.classList.toggle("is-wide", columns > 7);
    this.root.replaceChildren(...parts);
  }
}
