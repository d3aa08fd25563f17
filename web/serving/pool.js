// Drawing a serving run's frames (Python's lesson.serving.Serving, one frame per scheduler
// step): the step's decisions in words, the block pool as a grid, the block tables, the prefix
// tree, the memory bar and the timeline of who ran when. Pure functions of a frame and the
// run's result; serving.js puts them on the page.

import { el, plural } from "../ui/render.js";

const SVG = "http://www.w3.org/2000/svg";
export const STATE_WORDS = {
  F: "free", U: "held by one request", T: "held by one request and kept by the prefix tree",
  S: "shared by requests", C: "kept by the prefix tree only",
};

function list(items) {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`;
}

/** "Request 0" or "Requests 0 and 2": a label is a request's number, never a count. */
function requests(labels, lower = false) {
  const word = labels.length === 1 ? "Request" : "Requests";
  return `${lower ? word.toLowerCase() : word} ${list(labels)}`;
}

/** What the scheduler did at a step, in sentences (labels: request number -> its label). */
export function stepWords(frame, labels, blockSize) {
  const name = (n) => labels[n] ?? String(n);
  const reused = Object.fromEntries(frame.reused);
  const out = [];
  const fresh = frame.joined.filter((n) => !frame.recomputed.includes(n));
  if (fresh.length) {
    const parts = fresh.map((n) => {
      if (frame.forked.includes(n)) return `${name(n)} (its prompt’s blocks shared with its first sample)`;
      if (reused[n]) return `${name(n)} (${plural(reused[n], "position", "positions")} of its prompt found in the prefix tree, ${plural(reused[n] / blockSize, "block", "blocks")} not computed again)`;
      return name(n);
    });
    out.push(`${requests(parts)} joined.`);
  }
  if (frame.recomputed.length) {
    out.push(`${requests(frame.recomputed.map(name))} came back after a preemption: ${frame.recomputed.length === 1 ? "its window was" : "their windows were"} computed again in one pass.`);
  }
  if (frame.preempted.length) {
    out.push(`The step needed more blocks than were free, so ${requests(frame.preempted.map(name), true)} (the youngest) ${frame.preempted.length === 1 ? "was" : "were"} preempted: blocks given back, back to the head of the queue.`);
  }
  if (frame.copied.length) {
    out.push(`Copied on write: ${list(frame.copied.map(([from, to]) => `block ${from} → ${to}`))} (a shared block with room left, about to be written into).`);
  }
  if (frame.evicted.length) {
    out.push(`The prefix tree gave back ${list(frame.evicted.map((b) => `block ${b}`))}: least recently used, and no request held ${frame.evicted.length === 1 ? "it" : "them"}.`);
  }
  if (frame.left.length) {
    out.push(`${requests(frame.left.map(name))} finished and left: the blocks the prefix tree keeps stay there; the rest go back to the free list (the last, partly filled one, and any whose tokens the tree holds in another block).`);
  }
  const waiting = frame.waiting.length ? `; ${plural(frame.waiting.length, "request waits", "requests wait")}` : "";
  out.push(`${plural(frame.tables.length, "request", "requests")} decoded a token${waiting}.`);
  return `Step ${frame.step}. ${out.join(" ")}`;
}

/** Who holds each block at a frame: block -> the labels of the requests whose tables have it. */
export function holders(frame, labels) {
  const out = {};
  for (const [n, , table] of frame.tables) {
    if (frame.left.includes(n)) continue; // its blocks went back after the step
    for (const b of table) (out[b] ||= []).push(labels[n] ?? String(n));
  }
  return out;
}

/** The pool as a grid of squares. */
export function drawGrid(frame, labels) {
  const owners = holders(frame, labels);
  const copied = new Set(frame.copied.map(([, to]) => to));
  const grid = document.createDocumentFragment();
  for (let b = 0; b < frame.state.length; b += 1) {
    const s = frame.state[b];
    const cell = el("span", `block is-${s}${copied.has(b) ? " is-copied" : ""}`);
    const who = owners[b] || [];
    cell.title = `Block ${b}: ${STATE_WORDS[s]}${frame.refs[b] > 1 ? ` by ${frame.refs[b]} holders` : ""}${who.length ? ` (request ${who.join(", ")})` : ""}${copied.has(b) ? "; copied on write at this step" : ""}`;
    if (who.length) cell.append(el("span", "block-who", who[0]));
    if (frame.refs[b] > 1) cell.append(el("span", "block-refs", `×${frame.refs[b]}`));
    grid.append(cell);
  }
  return grid;
}

/** The grid's words for a screen reader: how many blocks are in each state. */
export function gridLabel(frame) {
  const count = { F: 0, U: 0, T: 0, S: 0, C: 0 };
  for (const s of frame.state) count[s] += 1;
  return `The block pool at step ${frame.step}: ${frame.state.length} blocks; ${count.U} held by one request, ${count.T} held by one request and kept by the prefix tree, ${count.S} shared by requests, ${count.C} kept by the prefix tree only, ${count.F} free.`;
}

/** The block tables of the requests that decoded at a frame. */
export function drawTables(frame, labels) {
  return frame.tables.map(([n, length, table]) => {
    const li = el("li", "serving-table");
    const left = frame.left.includes(n);
    li.append(el("span", "serving-table-who", `${labels[n] ?? n}${left ? " (left)" : ""}`),
      el("span", "serving-table-len", plural(length, "position", "positions")));
    const blocks = el("span", "serving-table-blocks");
    for (const b of table) {
      const s = frame.state ? frame.state[b] : "U"; // after the step: a leaver's blocks are the tree's or free
      blocks.append(el("span", `chip is-${s}`, String(b)));
    }
    li.append(blocks);
    return li;
  });
}

/** A token's text as the tree shows it: the start token as ⟨s⟩, spaces and newlines visible. */
export function pieceText(p) {
  if (p == null) return "⟨s⟩";
  return p.replace(/ /g, "·").replace(/\n/g, "⏎");
}

/** The prefix tree as nested lists: nodes [block, parent block (-1: the root), pieces]. */
export function drawTree(frame) {
  const kids = {};
  for (const node of frame.tree) (kids[node[1]] ||= []).push(node);
  const grow = (parent) => {
    const ul = el("ul", "tree-level");
    for (const [block, , pieces] of kids[parent] || []) {
      const li = el("li", `tree-node is-${frame.state[block]}`);
      li.append(el("span", "tree-block", `block ${block}`), el("span", "tree-text mono", pieces.map(pieceText).join("")));
      if (kids[block]) li.append(grow(block));
      ul.append(li);
    }
    return ul;
  };
  if (!frame.tree.length) return el("p", "hint", "Empty: no request has filled a block yet (a window shorter than one block puts nothing in).");
  return grow(-1);
}

/** The memory bar's parts: [key, positions, words], in the bar's order. */
export function memoryParts(frame) {
  const m = frame.memory;
  return [
    ["used", m.used, "keys and values of running requests"],
    ["reserved", m.reserved, "reserved: room left in their last blocks"],
    ["cached", m.cached, "kept by the prefix tree for later requests"],
    ["free", m.free, "free"],
  ];
}

export function drawBar(frame) {
  const parts = memoryParts(frame);
  const total = parts.reduce((a, [, n]) => a + n, 0) || 1;
  return parts.filter(([, n]) => n > 0).map(([key, n]) => {
    const seg = el("span", `bar-part is-${key}`);
    seg.style.width = `${(100 * n) / total}%`;
    return seg;
  });
}

export function barLabel(frame) {
  const parts = memoryParts(frame);
  const total = parts.reduce((a, [, n]) => a + n, 0);
  return `Memory at step ${frame.step}, ${total} positions: ` + parts.map(([, n, words]) => `${n} ${words}`).join("; ") + ".";
}

/** Who ran when: one row per request, steps across; the current step as an upright line. */
export function drawTimeline(result, step) {
  const W = 7, H = 14, left = 44, top = 16;
  const steps = result.steps;
  const rows = result.requests;
  const svg = document.createElementNS(SVG, "svg");
  const width = left + steps * W + 8, height = top + rows.length * H + 4;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("width", String(width));
  svg.setAttribute("height", String(height));
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `Who ran when: ${plural(rows.length, "request", "requests")} over ${plural(steps, "step", "steps")}; the line marks step ${step}.`);
  const add = (tag, attrs, text) => {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (text != null) node.textContent = text;
    svg.append(node);
    return node;
  };
  for (let s = 0; s <= steps; s += 10) add("text", { x: left + s * W, y: 10, class: "tl-axis" }, String(s));
  rows.forEach((r, i) => {
    const y = top + i * H;
    add("text", { x: left - 6, y: y + H - 4, class: "tl-label", "text-anchor": "end" }, r.label);
    const first = r.spans.length ? r.spans[0][0] : steps;
    if (first > r.arrival) add("line", { x1: left + r.arrival * W, x2: left + first * W, y1: y + H / 2, y2: y + H / 2, class: "tl-wait" });
    r.spans.forEach(([a, b], k) => {
      add("rect", { x: left + a * W, y: y + 2, width: (b - a + 1) * W, height: H - 4, rx: 2, class: "tl-run" });
      if (k < r.spans.length - 1) {
        const next = r.spans[k + 1][0];
        add("line", { x1: left + (b + 1) * W, x2: left + next * W, y1: y + H / 2, y2: y + H / 2, class: "tl-wait" });
        add("rect", { x: left + (b + 1) * W - 1.5, y: y + 1, width: 3, height: H - 2, class: "tl-preempt" });
      }
    });
  });
  add("line", { x1: left + step * W + W / 2, x2: left + step * W + W / 2, y1: top - 3, y2: height, class: "tl-now" });
  return svg;
}
