// The chapter Scores and sampling's suggestions: temperatures with the seed fixed, greedy's loop
// and the repetition penalty, top-k 1 beside greedy.

import { pct, plural, quoted } from "../../ui/render.js";
import { onScreen } from "../../embed/presence.js";

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const chance = (steps) => mean(steps.map((s) => Math.exp(s.logprob)));

/** A generated text that ends in a loop: {start, loop} of the shortest stretch repeated to the end (at least twice), or null. */
export function findLoop(text, minRepeats = 2) {
  const n = text.length;
  for (let period = 1; period <= Math.floor(n / minRepeats); period++) {
    let start = n - period;
    while (start > 0 && text[start - 1] === text[start - 1 + period]) start -= 1;
    if (n - start >= period * minRepeats) return { start, loop: text.slice(start, start + period) };
  }
  return null;
}

/** Are two loops the same cycle, read from another character ("e th" and " the")? */
export function sameLoop(a, b) {
  return Boolean(a && b) && a.loop.length === b.loop.length && (a.loop + a.loop).includes(b.loop);
}

export const TRIES = [
  {
    id: "temperatures",
    where: "sampling",
    text: "Keep the seed fixed and compare temperatures 0.3, 1 and 2. Which name does the model itself find likeliest, and which strays furthest from its favourites?",
    async act(page) {
      const runs = [];
      for (const temperature of [0.3, 1, 2]) runs.push(await page.run({ dataset: "names", seed: 5, temperature }));
      const kept = page.runs.kept;
      page.runs.show(kept[kept.length - 3].number, kept[kept.length - 1].number);
      return runs;
    },
    answer(runs) {
      const parts = runs.map((r) => `at T = ${Number(r.settings.temperature)} ${quoted(r.text)} (the model’s own average chance per character: ${pct(chance(r.steps))})`);
      const sorted = [...runs].sort((a, b) => chance(b.steps) - chance(a.steps));
      const best = sorted[0];
      const worst = sorted[sorted.length - 1];
      return {
        text: `Same seed, same draws u, three temperatures: ${parts.join("; ")}. The model itself found the characters of the T = ${Number(best.settings.temperature)} run likeliest and those of the T = ${Number(worst.settings.temperature)} run least likely: a low temperature sharpens the distribution towards the model’s favourites, a high one flattens it, so rare characters get drawn.${onScreen("runs") ? " The two ends are side by side under Compare runs." : ""}`,
        evidence: [["#runs-compare", runs[0].text], ["#runs-compare", runs[2].text]],
      };
    },
  },
  {
    id: "greedy-loop",
    where: "sampling",
    text: "Choose English prose and turn on Greedy. Why does it end up repeating itself? Then set Repetition penalty to 1.5: why does that help only for a while?",
    async act(page) {
      const plain = await page.run({ dataset: "prose", prompt: "The ", greedy: true, max_new_tokens: 200 });
      const penalised = await page.run({ dataset: "prose", prompt: "The ", greedy: true, max_new_tokens: 200, repetition_penalty: 1.5 });
      return [plain, penalised];
    },
    answer([plain, penalised]) {
      const a = findLoop(plain.text);
      const b = findLoop(penalised.text);
      const evidence = [["#text-gen", penalised.text.slice(0, 40)]];
      const first = a
        ? `Greedy always takes the argmax, so whenever it is back in the same place it makes the same choice: from character ${a.start + 1} on, the text is ${quoted(a.loop)} over and over until the budget runs out.`
        : "This time greedy did not settle into a loop within the budget, but it always takes the argmax, so the same place always gives the same choice.";
      const second = b
        ? `With the penalty, every character already used is marked down, which breaks the first loop (${a ? `it starts at character ${b.start + 1} instead of ${a.start + 1}` : `it starts at character ${b.start + 1}`}); but once every common character has been used they are all marked down alike, the argmax is back where it was, and ${sameLoop(a, b) ? `the same loop comes back: ${quoted(b.loop)} is ${quoted(a.loop)} read from another character` : `a new loop ${quoted(b.loop)} sets in`}.`
        : `With the penalty, every character already used is marked down, and within ${plural(penalised.text.length, "character", "characters")} no loop sets in; the marks stay on every character already used, so on a longer run the common ones end up all marked down alike.`;
      return { text: `${first} ${second} ${"The last run, the one on screen in the workbench, is the one with the penalty."}`, evidence };
    },
  },
  {
    id: "top-k-1",
    where: "sampling",
    text: "Set Top-k to 1 and compare with greedy: is it the same text?",
    async act(page) {
      const topk = await page.run({ dataset: "names", seed: 3, top_k: 1 });
      const greedy = await page.run({ dataset: "names", seed: 3, greedy: true });
      const kept = page.runs.kept;
      page.runs.show(kept[kept.length - 2].number, kept[kept.length - 1].number);
      return [topk, greedy];
    },
    answer([topk, greedy]) {
      const ties = topk.steps.filter((s) => s.kept_count > 1).length;
      const same = topk.text === greedy.text;
      let text = same
        ? `Yes: both wrote ${quoted(topk.text)}. Top-k 1 keeps only the likeliest candidate, so the draw has nothing left to choose from: it is greedy by another route, and the seed no longer matters.`
        : `No: top-k 1 wrote ${quoted(topk.text)} and greedy ${quoted(greedy.text)}.`;
      if (ties) text += ` At ${plural(ties, "step", "steps")} top-k kept more than one candidate: they tied for first, and top-k keeps ties, so the draw chose among them.`;
      return { text: `${text}${onScreen("runs") ? " Both are side by side under Compare runs." : ""}`, evidence: [["#runs-compare", topk.text], ["#runs-compare", greedy.text]] };
    },
  },
];
