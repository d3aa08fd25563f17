// The beam tree as Python's lesson.search.tree gives it, laid out and drawn: one column per
// step, one row per beam, a line from each beam to the beam it grew from; finished paths below
// the running ones, in the column of the step they finished. A node on a returned path is drawn
// strong (the best one strongest), the rest faded: pruned branches. Pure layout first (tested in
// tests/js), then the SVG.

import { svg } from "../ui/plot.js";

export const COL = 64;
export const ROW = 42;
export const NODE_W = 52;
export const NODE_H = 32;
const PAD = 12;
const ROOT_W = 44;

/** Where everything goes, for the steps 0..upto: {nodes, edges, width, height}. */
export function layout(tree, upto) {
  const beams = tree.nodes.length ? tree.nodes[0].length : 0;
  const last = Math.min(upto, tree.nodes.length - 1);
  const x = (s) => PAD + ROOT_W + 14 + s * COL;
  const y = (row) => PAD + row * ROW;
  const rootY = y(0);
  const nodes = [];
  const edges = [];
  const at = (s, slot) => ({ x: x(s) + NODE_W, y: y(slot) + NODE_H / 2 });
  const from = (s, parent) => (s === 0 ? { x: PAD + ROOT_W, y: rootY + NODE_H / 2 } : at(s - 1, parent));
  for (let s = 0; s <= last; s += 1) {
    tree.nodes[s].forEach((n, slot) => {
      if (n.blocked) return;
      const kind = n.rank === 1 ? "best" : n.rank ? "returned" : "pruned";
      nodes.push({ step: s, slot, x: x(s), y: y(slot), text: n.token_text, score: n.score, rank: n.rank, kind, finished: false });
      const a = from(s, n.parent);
      edges.push({ x1: a.x, y1: a.y, x2: x(s), y2: y(slot) + NODE_H / 2, kind });
    });
  }
  // finished paths: below the running beams, stacked per step
  const stacked = {};
  let deepest = beams;
  for (const f of tree.finished) {
    if (f.step > last) continue;
    // in the bank at the step shown, or let go by then (for better ones)
    const held = f.left === null || f.left > last;
    const k = stacked[f.step] || 0;
    stacked[f.step] = k + 1;
    const row = beams + 0.4 + k;
    deepest = Math.max(deepest, row + 1);
    const kind = f.rank === 1 ? "best" : f.rank ? "returned" : "pruned";
    nodes.push({ step: f.step, slot: null, x: x(f.step), y: y(row), text: f.token_text, score: f.score, rank: f.rank, kind, finished: true, held, left: f.left });
    const a = from(f.step, f.parent);
    edges.push({ x1: a.x, y1: a.y, x2: x(f.step), y2: y(row) + NODE_H / 2, kind, finished: true });
  }
  return { nodes, edges, root: { x: PAD, y: rootY, w: ROOT_W }, width: x(Math.max(last, 0)) + NODE_W + PAD, height: y(deepest) + PAD, beams };
}

/** What happened to each candidate of a step, in words. */
export function fate(c, step) {
  const kept = step.kept.findIndex((k) => k.from === c.beam && k.token_id === c.token_id && k.score === c.score);
  if (kept >= 0 && !c.finished) return `kept as beam ${kept}`;
  if (c.banked) return "finished: into the bank";
  if (c.entered) return "finished, but the bank held better ones: dropped";
  if (c.finished) return "finished, but not among the best: dropped";
  return "pruned";
}

/** A score as the tree prints it: −2.31. */
export function score(x) {
  return x == null ? "–" : x.toFixed(2).replace(/^-/, "−");
}

/** A token as a node holds it: at most 6 characters, the rest said by "…" (its title has all). */
export function short(text) {
  const chars = [...text];
  return chars.length > 6 ? `${chars.slice(0, 5).join("")}…` : text;
}

/** The tree drawn as an <svg role="img">, labelled with what it shows. */
export function drawTree(tree, upto, readable, label) {
  const L = layout(tree, upto);
  const out = svg("svg", { viewBox: `0 0 ${L.width} ${L.height}`, width: L.width, height: L.height, role: "img", "aria-label": label, class: "beam-svg" });
  if (L.beams) {
    const sep = PAD + L.beams * ROW - 4;
    if (L.nodes.some((n) => n.finished)) {
      out.append(svg("line", { x1: PAD, x2: L.width - PAD, y1: sep, y2: sep, class: "beam-sep" }));
      out.append(svg("text", { x: PAD, y: sep + 12, class: "beam-sep-label" }, "finished"));
    }
  }
  out.append(svg("rect", { x: L.root.x, y: L.root.y, width: L.root.w, height: NODE_H, rx: 6, class: "beam-root" }));
  out.append(svg("text", { x: L.root.x + L.root.w / 2, y: L.root.y + NODE_H / 2 + 4, class: "beam-root-text" }, "prompt"));
  // faded first, so the strong lines are drawn over them
  const order = { pruned: 0, returned: 1, best: 2 };
  for (const e of [...L.edges].sort((a, b) => order[a.kind] - order[b.kind])) {
    const mid = (e.x1 + e.x2) / 2;
    out.append(svg("path", { d: `M${e.x1},${e.y1} C${mid},${e.y1} ${mid},${e.y2} ${e.x2},${e.y2}`, class: `beam-edge is-${e.kind}${e.finished ? " is-finished" : ""}` }));
  }
  for (const n of L.nodes) {
    const g = svg("g", { class: `beam-node is-${n.kind}${n.finished ? " is-finished" : ""}${n.finished && !n.held ? " is-dropped" : ""}` });
    const what = n.finished ? "finished with" : "token";
    const bank = !n.finished ? "" : n.held ? ", in the bank" : n.left === n.step ? ", not taken into the bank: it held better ones" : `, let go by the bank at step ${n.left} for better ones`;
    g.append(svg("title", {}, `Step ${n.step}: ${what} ${readable(n.text)}, score ${score(n.score)}${bank}${n.rank ? `, on returned path ${n.rank}` : ""}`));
    g.append(svg("rect", { x: n.x, y: n.y, width: NODE_W, height: NODE_H, rx: 6 }));
    g.append(svg("text", { x: n.x + NODE_W / 2, y: n.y + 13, class: "beam-token" }, (n.finished ? (n.held ? "✓ " : "✗ ") : "") + short(readable(n.text))));
    g.append(svg("text", { x: n.x + NODE_W / 2, y: n.y + 26, class: "beam-score" }, score(n.score)));
    out.append(g);
  }
  return out;
}
