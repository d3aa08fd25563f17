// Try this, one click: each suggestion of the lesson has a button that sets the page up and runs
// it, as a learner would (the workbench's form and Generate, or a panel's own controls), and an
// answer written from what that run showed. Every answer also lists its evidence: where on the
// page each thing it claims can be seen, so a test can check that it is there.
//
// A suggestion is {id, where, text, act(page) -> Promise of what it saw, answer(seen) ->
// {text, evidence: [[selector, words], ...]}}; `page` offers run(settings) (apply, Generate, wait
// for the end), apply(settings), kv() (the KV-cache panels, each with its own way to be run),
// text (the generated text) and runs (the runs kept for comparing). A suggestion works the
// panels through what they offer, never through another panel's buttons.

import { el, finishSentence, pct, plural, readable } from "../ui/render.js";
import { onScreen } from "../embed/presence.js";
import { sci } from "../ui/plot.js";

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const chance = (steps) => mean(steps.map((s) => Math.exp(s.logprob)));
const quote = (text) => `“${readable(text)}”`;

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

// What the live cache check of a run with a tool call found, in words that follow its numbers.
function checkSentence(steps) {
  const checked = steps.filter((s) => s.cache_diff != null);
  if (!checked.length) return "The cache check was off, so nothing was compared.";
  const bad = checked.find((s) => !s.cache_ok);
  return bad ? `The cache check failed at step ${bad.step + 1}.` : `The cache check passed at all ${checked.length} steps the model took, across the resume.`;
}

export // The serving chapter's suggestions start from the seeded prose workload, the panel's other
// fields at their defaults, then change one thing.
const SERVED = { dataset: "prose", tokenizer: "chars", requests: 16, block_size: 16, memory_blocks: "", max_running: 8, parallel_samples: 1, seed: 42, workload: "" };
const REFUSED = "the panel’s fields need fixing first: see the messages next to them";

async function servedTwice(page, change) {
  const first = await page.serving().serve(SERVED);
  const then = await page.serving().serve(change);
  if (!first || !then) throw new Error(REFUSED);
  return [first, then];
}

const TRIES = [
  {
    id: "temperatures",
    where: "sampling",
    text: "Keep the seed fixed and compare temperatures 0.3, 1 and 2. Which looks most like a real name? Which strays furthest?",
    async act(page) {
      const runs = [];
      for (const temperature of [0.3, 1, 2]) runs.push(await page.run({ dataset: "names", seed: 5, temperature }));
      const kept = page.runs.kept;
      page.runs.show(kept[kept.length - 3].number, kept[kept.length - 1].number);
      return runs;
    },
    answer(runs) {
      const parts = runs.map((r) => `at T = ${Number(r.settings.temperature)} ${quote(r.text)} (the model’s own average chance per character: ${pct(chance(r.steps))})`);
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
        ? `Greedy always takes the argmax, so whenever it is back in the same place it makes the same choice: from character ${a.start + 1} on, the text is ${quote(a.loop)} over and over until the budget runs out.`
        : "This time greedy did not settle into a loop within the budget, but it always takes the argmax, so the same place always gives the same choice.";
      const second = b
        ? `With the penalty, every character already used is marked down, which breaks the first loop (${a ? `it starts at character ${b.start + 1} instead of ${a.start + 1}` : `it starts at character ${b.start + 1}`}); but once every common character has been used they are all marked down alike, the argmax is back where it was, and a new loop ${quote(b.loop)} sets in.`
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
        ? `Yes: both wrote ${quote(topk.text)}. Top-k 1 keeps only the likeliest candidate, so the draw has nothing left to choose from: it is greedy by another route, and the seed no longer matters.`
        : `No: top-k 1 wrote ${quote(topk.text)} and greedy ${quote(greedy.text)}.`;
      if (ties) text += ` At ${plural(ties, "step", "steps")} top-k kept more than one candidate: they tied for first, and top-k keeps ties, so the draw chose among them.`;
      return { text: `${text}${onScreen("runs") ? " Both are side by side under Compare runs." : ""}`, evidence: [["#runs-compare", topk.text], ["#runs-compare", greedy.text]] };
    },
  },
  {
    id: "budget",
    where: "lesson",
    text: "Set Max new tokens to 5 and read the finish reason. Then type the prompt “jo” and try a few seeds.",
    async act(page) {
      const runs = [await page.run({ dataset: "names", seed: 1, max_new_tokens: 5 })];
      for (const seed of [1, 2, 3]) runs.push(await page.run({ dataset: "names", prompt: "jo", seed, max_new_tokens: 5 }));
      return runs;
    },
    answer(runs) {
      const [first, ...jo] = runs;
      const said = (r) => finishSentence(r.finish_reason, r.stop_reason, r.settings.max_new_tokens);
      const cut = jo.filter((r) => r.finish_reason === "length").length;
      return {
        text: `The first run wrote ${quote(first.text)}: ${said(first)} With the prompt “jo”: ${jo.map((r) => `seed ${r.settings.seed} ${quote(`jo${r.text}`)} (${r.finish_reason === "length" ? "budget" : "end-of-sequence"})`).join(", ")}. ${cut ? `${plural(cut, "run", "runs")} hit the budget: a name cut off there is a resource limit, not the model deciding the name is done.` : "None hit the budget: each name ended because the model chose end-of-sequence."} ${onScreen("text") ? "The last one is the text on screen in the workbench, with its finish reason." : ""}`,
        evidence: [["#finish-text", said(jo[jo.length - 1])], ["#text-gen", jo[jo.length - 1].text]],
      };
    },
  },
  {
    id: "token-boundaries",
    where: "tokens",
    text: "Generate prose with the BPE tokenizer and Show tokens on. How many characters does one step add?",
    async act(page) {
      page.text.showTokens(true);
      return page.run({ model: "transformer", dataset: "prose", tokenizer: "bpe", seed: 3, max_new_tokens: 40 });
    },
    answer(r) {
      const pieces = r.steps.map((s) => s.piece || "").filter(Boolean);
      const chars = pieces.reduce((n, p) => n + [...p].length, 0);
      const longest = pieces.reduce((a, b) => ([...b].length > [...a].length ? b : a), "");
      return {
        text: `${plural(r.steps.length, "step", "steps")} wrote ${plural(chars, "character", "characters")}: ${(chars / Math.max(1, r.steps.length)).toFixed(1)} per step on average, where the character models add exactly one. The longest token was ${quote(longest)}. The shaded tiles in the text are the tokens; most words come with the space in front of them.`,
        evidence: [["#text-gen", r.text.slice(0, 12)]],
      };
    },
  },
  {
    id: "stop-inside",
    where: "tokens",
    text: "Same run, with the stop string “e”. Where does the text end: between two tokens, or inside one?",
    async act(page) {
      return page.run({ model: "transformer", dataset: "prose", tokenizer: "bpe", seed: 3, max_new_tokens: 40, stop: ["e"] });
    },
    answer(r) {
      const last = r.steps[r.steps.length - 1];
      if (r.finish_reason !== "stop" || !last.stop_at) {
        return { text: `This run never wrote an “e”, so it ended for another reason (${r.finish_reason}).`, evidence: [["#finish-text", ""]] };
      }
      const at = r.steps[last.stop_at.step];
      const n = at.token_bytes.length / 2;
      const inside = last.stop_at.byte > 0 && last.stop_at.byte < n;
      return {
        text: inside
          ? `Inside one. The “e” came in the token ${quote(at.token_text)} (step ${last.stop_at.step + 1}), and the text stops after ${plural(last.stop_at.byte, "byte", "bytes")} of its ${n}: the token is cut in two, and the rest is struck out after the text. A stop string is a rule about text, not about tokens.`
          : `Between two tokens this time: the “e” began token ${quote(at.token_text)}. Try another seed: usually it falls inside a token.`,
        evidence: [["#text-cut", "cut"]],
      };
    },
  },
  {
    id: "trailing-space",
    where: "tokens",
    text: "Prompt “The man ” (with a space at the end) on the BPE transformer, greedy: first without token healing, then with it. What does it write first?",
    async act(page) {
      const base = { model: "transformer", dataset: "prose", tokenizer: "bpe", prompt: "The man ", greedy: true, max_new_tokens: 12 };
      const plain = await page.run({ ...base, token_healing: false });
      const healed = await page.run({ ...base, token_healing: true });
      return { plain, healed };
    },
    answer({ plain, healed }) {
      const first = (r) => r.steps[0];
      const a = first(plain);
      const b = first(healed);
      const spaced = (r) => r.steps[0].top.filter((c) => c.token_text.startsWith(" ")).reduce((t, c) => t + c.p_raw, 0);
      return {
        text: `Without healing, the prompt ends in a lone space token, and the model’s first token was ${quote(a.token_text)} at ${pct(Math.exp(a.logprob))}; its ten likeliest candidates that start with a space held only ${pct(spaced(plain))}, because in training a space almost never stands alone before a word. With healing, that space is taken back and the first token must start with it: the model chose ${quote(b.token_text)} at ${pct(Math.exp(b.logprob))}, a word with its space, the way it saw words in training.`,
        evidence: [["#text-prompt", "The man"]],
      };
    },
  },
  {
    id: "tool-call",
    where: "tools",
    text: "Choose the arithmetic data and the transformer, greedy, and ask “What is 512 plus 399?”. Where does the model stop writing, who writes the number after the equals sign, and is the answer right?",
    async act(page) {
      return page.run({ model: "transformer", dataset: "tasks", prompt: "What is 512 plus 399?", greedy: true, tools: "on", max_new_tokens: 40, cache_check: true });
    },
    answer(r) {
      const close = r.steps.findIndex((s) => s.source === "model" && s.token_text === "<|/call|>");
      if (close < 0) return { text: `This time the model never closed a call, so no tool ran; it ended with ${r.finish_reason}. The answer was “${r.text}”.`, evidence: [["#finish-text", ""]] };
      const tool = r.steps.filter((s) => s.source === "tool");
      const call = tool.length ? tool[0].tool_call : null;
      const before = r.steps[close].cache_length;
      const after = tool.length ? tool[tool.length - 1].cache_length : before;
      const right = /(^|\D)911(\D|$)/.test(r.text);
      return {
        text: `The model wrote the call “${call ? call.call : "?"}” and closed it at step ${close + 1}: there its turn ended. The calculator (a program, not the model) answered ${call && call.result != null ? `“${call.result}”` : `with an error: ${call ? call.error : "?"}`}, and the model’s closing token went through the model together with the answer’s ${plural(tool.length, "token", "tokens")}, in one pass: the cache went from ${before} to ${after} positions (${after - before === tool.length + 1 ? `1 + ${tool.length}` : `${after - before}`}), and nothing before them was computed again. Then the model went on and wrote “${r.text}”, which is ${right ? "right: 512 + 399 = 911" : "wrong: 512 + 399 = 911"}. ${checkSentence(r.steps)}`,
        evidence: [["#text-gen", r.text.slice(0, 10)], ["#cache-meta", "tool result"]],
      };
    },
  },
  {
    id: "tools-off",
    where: "tools",
    text: "Same question with Tool calls set to off. How does the run end?",
    async act(page) {
      return page.run({ model: "transformer", dataset: "tasks", prompt: "What is 512 plus 399?", greedy: true, tools: "off", max_new_tokens: 40 });
    },
    answer(r) {
      return {
        text: r.finish_reason === "tool_calls"
          ? `It ends at the call: finish reason tool_calls. The model asked for the calculator and stopped; with tools off nothing runs the call, so there is no answer yet. A real application would run the tool itself and start the model again with the result, which is exactly what Tool calls “on” does for you.`
          : `The model did not make a call this time, so it ended with ${r.finish_reason}.`,
        evidence: [["#finish-text", finishSentence(r.finish_reason, r.stop_reason, 40)]],
      };
    },
  },
  {
    id: "tools-guess",
    where: "tools",
    text: "Now set Tool calls to guess: no calculator, so the model must write the result itself. Is it still right?",
    async act(page) {
      return page.run({ model: "transformer", dataset: "tasks", prompt: "What is 512 plus 399?", greedy: true, tools: "guess", max_new_tokens: 40 });
    },
    answer(r) {
      const right = /(^|\D)911(\D|$)/.test(r.text);
      return {
        text: `The model wrote “${r.text}”: ${right ? "right this time, by luck or by a sum it has seen often" : "wrong: 512 + 399 = 911"}. It learned to copy numbers into a call and back out of a result, not to add them; the arithmetic was always the calculator’s. ${onScreen("tools") ? "The accuracy experiment, in the same part of the lesson as this suggestion, measures this on many questions at once." : ""}`,
        evidence: [["#text-gen", r.text.slice(0, 10)]],
      };
    },
  },
  {
    id: "context-shift",
    where: "kv",
    text: "Choose the transformer and Names, tick Ignore EOS, set Max new tokens to 100 and generate. When the window is full the oldest half is dropped: find the context shift in the cache card, and check that the cache still agrees.",
    async act(page) {
      return page.run({ model: "transformer", dataset: "names", seed: 2, ignore_eos: true, max_new_tokens: 100, cache_check: true, context_shift: "reread" });
    },
    answer(r) {
      const shifts = r.steps.map((s, i) => (s.context_shift ? i + 1 : null)).filter(Boolean);
      const worst = Math.max(...r.steps.map((s) => s.cache_diff));
      const ok = r.steps.every((s) => s.cache_ok);
      const before = shifts.length ? r.steps[shifts[0] - 2].cache_length : null;
      return {
        text: shifts.length
          ? `The cache held ${before} positions, the whole window, at step ${shifts[0] - 1}; at step ${shifts[0]} the oldest half was dropped and the rest read again (${plural(shifts.length, "context shift", "context shifts")} in all, marked “shift” on the chart). The check ${ok ? "passed at every step, shifts included" : "failed"}: the largest difference between the cached logits and a full recomputation was ${worst.toExponential(1)}.`
          : `No context shift happened: the window never filled. The largest difference was ${worst.toExponential(1)}.`,
        evidence: [["#cache-meta", shifts.length ? "context shift" : "step"], ["#cache-verdict", ok ? "passed" : "failed"]],
      };
    },
  },
  {
    id: "k-shift",
    where: "kv",
    text: "Now set When the window is full to kshift and generate the same run again. Nothing is read again at the shift: the kept keys are turned back by the dropped length. How far off is the cache at the shift, and after it?",
    async act(page) {
      const same = { model: "transformer", dataset: "names", seed: 2, ignore_eos: true, max_new_tokens: 100, cache_check: true };
      const reread = await page.run({ ...same, context_shift: "reread" });
      const kshift = await page.run({ ...same, context_shift: "kshift" });
      return { reread, kshift };
    },
    answer({ reread, kshift }) {
      const worst = (r) => Math.max(...r.steps.map((s) => s.cache_diff));
      const at = kshift.steps.findIndex((s) => s.context_shift);
      if (at < 0) return { text: "No context shift happened: the window never filled.", evidence: [] };
      const d = kshift.steps.map((s) => s.cache_diff);
      const last = d.length - 1;
      const later = Math.min(at + 25, last);
      const fades = d[later] < d[at] / 3;
      return {
        text: `Read again, the cache never left the recomputation by more than ${sci(worst(reread))}. Turned back instead, it was off by ${sci(d[at])} at the shift (step ${at + 1}) and by ${sci(d[later])} ${plural(later - at, "step", "steps")} later; the check failed at ${plural(kshift.steps.filter((s) => !s.cache_ok).length, "step", "steps")}. The turn itself is exact up to rounding: a rotation by the dropped length moves every kept key to its new position. What it cannot undo is that the kept tokens’ second and later layers were computed while the dropped text was still in view; re-reading computes them without it. ${fades ? "The gap fades as newer tokens, computed after the shift, take over more of the attention." : "Here the gap does not fade: the kept half of the window is read at every step, its deeper keys and values as they were."} llama.cpp accepts that to skip the re-read.`,
        evidence: [["#cache-meta", "context shift"], ["#cache-verdict", "failed"]],
      };
    },
  },
  {
    id: "two-models",
    where: "kv",
    text: "Run both models on the same prompt and seed. Which one writes names that look real? Compare their held-out losses.",
    async act(page) {
      await page.apply({ dataset: "names", seed: 11 });
      const out = await page.kv().compare.run();
      if (!out) throw new Error("the settings need fixing first: see the messages next to them");
      return { out, info: page.info().datasets.names };
    },
    answer({ out, info }) {
      const bigram = out.runs.bigram;
      const transformer = out.runs.transformer;
      const lossB = typeof info.val_nll === "object" ? info.val_nll.bigram : info.val_nll;
      const lossT = info.transformer.val_nll;
      const better = lossT < lossB ? "transformer" : "bigram";
      return {
        text: `Same prompt, same seed: the bigram wrote ${quote(bigram.text)}, the transformer ${quote(transformer.text)}. Held-out loss, the average surprise at the next character of names neither saw in training: bigram ${lossB.toFixed(2)}, transformer ${lossT.toFixed(2)} nats per character. The ${better} predicts unseen names better; the bigram sees only the last character, the transformer all of them.`,
        evidence: [["#compare-out", bigram.text], ["#compare-out", transformer.text]],
      };
    },
  },
  {
    id: "frozen",
    where: "kv",
    text: "Break the cache with “Positions not advanced”: why are the first steps still right?",
    async act(page) {
      // "an": letters every dataset's model knows, whatever was typed before
      return page.kv().lab.check({ bug: "frozen-position", prompt: "an" });
    },
    answer(r) {
      if (!r.ok) throw new Error((r.errors || []).map((e) => e.message).join(" "));
      const c = r.cache;
      let good = 0;
      while (good < c.per_step.length && c.per_step[good] <= c.tolerance) good += 1;
      return {
        text: `The first ${plural(good, "step agrees", "steps agree")} with the recomputation: step 1 is the prefill, which numbers the prompt’s positions correctly${good >= 2 ? ", and step 2 feeds the first new character at the position right after the prompt, which is exactly the position the bug freezes" : ""}. From step ${good + 1} on, every new character is fed at that same frozen position, so its key carries the wrong position, and the check fails (largest difference ${c.max_abs_diff.toExponential(1)}).`,
        evidence: [["#break-verdict", `failed from step ${good + 1}`]],
      };
    },
  },
  {
    id: "calculator",
    where: "kv",
    text: "In the calculator, put Llama 2 70B and 8 sequences of 4096 tokens: how much memory goes to the cache alone? Then switch KV heads to 64.",
    async act(page) {
      const memory = page.kv().memory;
      const gqa = await memory.set({ preset: "llama2-70b" });
      const both = await memory.set({ tokens: 4096, sequences: 8 });
      const mha = await memory.set({ kv_heads: 64 });
      return { gqa, both, mha };
    },
    answer({ both, mha }) {
      const gib = (n) => `${(n / 2 ** 30).toFixed(n >= 10 * 2 ** 30 ? 0 : 1)} GiB`;
      return {
        text: `Llama 2 70B shares 8 KV heads among its 64 query heads: ${both.bytes_per_token.toLocaleString("en")} bytes per token, so 8 sequences of 4096 tokens hold ${gib(both.total_bytes)} of keys and values, before any weights. With 64 KV heads, one per query head, it is ${gib(mha.total_bytes)}: ${Math.round(mha.total_bytes / both.total_bytes)} times as much. That saving is why large models use grouped-query attention.`,
        evidence: [["#mem-formula", mha.total_bytes.toLocaleString("en")]],
      };
    },
  },
  {
    id: "prefix-tree",
    where: "serving",
    text: "Serve the seeded prose workload with blocks of 16 positions, then of 4. How much of the prompts does the prefix tree find each time, and how much memory does paging leave empty?",
    async act(page) {
      const [big, small] = await servedTwice(page, { block_size: 4 });
      return { big, small };
    },
    answer({ big, small }) {
      return {
        text: `Blocks of 16: the tree found ${pct(big.prefix_hit_rate)} of the prompts’ tokens, and ${pct(big.waste.paged)} of the paged memory was empty. Blocks of 4: ${pct(small.prefix_hit_rate)} found, ${pct(small.waste.paged)} empty. Smaller blocks share more, because only whole blocks go into the tree and a shared start rarely ends on a block’s edge, and they waste less, because only a request’s last block has room left. Reserving whole windows would have left ${pct(small.waste.contiguous_max)} empty. Serving engines still use blocks of 16 or so: every block is one more entry to look up when attention reads the table.`,
        evidence: [["#serving-stats", pct(small.waste.paged)]],
      };
    },
  },
  {
    id: "preempt",
    where: "serving",
    text: "Now give the pool less memory: blocks of 16 and Memory blocks 20, about two and a half windows for eight running requests. Who is preempted, and does their text change?",
    async act(page) {
      const [roomy, tight] = await servedTwice(page, { memory_blocks: 20 });
      return { roomy, tight };
    },
    answer({ roomy, tight }) {
      const hit = tight.requests.filter((r) => r.preempted);
      const same = tight.requests.every((r, i) => r.text === roomy.requests[i].text);
      return {
        text: hit.length
          ? `${plural(hit.length, "request was", "requests were")} preempted (${hit.map((r) => r.label).join(", ")}), ${plural(tight.preemptions, "time", "times")} in all; the run took ${tight.steps} steps instead of ${roomy.steps}. ${same ? "Every text is the same as with room to spare" : "Some texts differ from the roomy run, which should not happen"}: a preempted request keeps its tokens and its seed’s draws, and when it joins again its window is computed again in one pass, giving the same keys and values. Preemption costs time and computing, never words.`
          : `No request was preempted: with ${tight.memory_blocks} blocks there was room at every step. Try fewer memory blocks.`,
        evidence: [["#serving-stats", String(tight.preemptions)]],
      };
    },
  },
  {
    id: "samples",
    where: "serving",
    text: "Ask for 4 samples per request (blocks of 16, memory empty again). How many blocks are copied on write, and why so few?",
    async act(page) {
      const r = await page.serving().serve({ ...SERVED, requests: 8, parallel_samples: 4 });
      if (!r) throw new Error(REFUSED);
      return r;
    },
    answer(r) {
      const prompts = r.runs / r.parallel_samples;
      return {
        text: `${prompts} prompts × 4 samples: each prompt was computed once and its blocks shared by its samples (at most ${r.blocks_shared} blocks shared at one step). Only ${plural(r.copies_on_write, "block was", "blocks were")} copied: full blocks are only read, so they stay shared for good; the one copied is a prompt’s last block when it still has room, once for each sample that writes into it while another still holds it, so at most 3 per prompt (the last sample writes in place). Without sharing, every sample would hold a copy of the whole prompt.`,
        evidence: [["#serving-stats", String(r.copies_on_write)]],
      };
    },
  },
];

export function createTries(app) {
  const lists = {
    lesson: document.getElementById("try-list"),
    sampling: document.getElementById("sampling-try-list"),
    tokens: document.getElementById("tokens-try-list"),
    tools: document.getElementById("tools-try-list"),
    kv: document.getElementById("kv-try-list"),
    serving: document.getElementById("serving-try-list"),
  };
  const items = {};
  const results = {};
  let busy = false;

  // One run of the workbench with these settings (on top of the defaults), as the learner would.
  const page = {
    async run(settings) {
      await app.apply(settings);
      const result = await app.generate();
      if (result.status !== "done") throw new Error(`the run did not finish (${result.status})`);
      const trace = app.run();
      return { ...result, steps: trace.steps };
    },
    apply: (settings) => app.apply(settings),
    kv: () => app.kv(),
    serving: () => app.serving(),
    info: () => app.info(),
    text: app.text,
    runs: app.runs,
  };

  for (const t of TRIES) {
    const li = el("li", "try-item");
    li.id = `try-${t.id}`;
    const button = el("button", "try-go", "Try it");
    button.type = "button";
    button.disabled = true;
    button.setAttribute("aria-describedby", `try-${t.id}-text`);
    const text = el("p", "try-text", t.text);
    text.id = `try-${t.id}-text`;
    const status = el("p", "try-status");
    status.setAttribute("role", "status");
    const answer = el("details", "try-answer");
    answer.hidden = true;
    answer.append(el("summary", null, "The answer, from your run"), el("p", "try-answer-text"));
    li.append(text, button, status, answer);
    lists[t.where].append(li);
    items[t.id] = { li, button, status, answer };
    button.addEventListener("click", () => go(t));
  }

  // A suggestion that runs the workbench takes the learner there (store.trip: the course draws
  // the way back), so the run is seen where it happens; one that works a panel of its own
  // chapter runs where the learner is reading.
  function tripping(t, item) {
    const from = item.li.closest(".chapter[data-chapter]")?.dataset.chapter;
    let away = false;
    const start = () => {
      if (away || !from) return;
      away = true;
      app.store.trip({ id: t.id, from, text: t.text, status: "running" });
      app.store.openChapter("start", { source: "trip" });
    };
    return {
      page: { ...page, run: (settings) => (start(), page.run(settings)) },
      end: (news) => { if (away) app.store.trip({ id: t.id, ...news }); },
      away: () => away,
    };
  }

  async function go(t) {
    if (busy) return;
    busy = true;
    const item = items[t.id];
    for (const i of Object.values(items)) i.button.disabled = true;
    item.status.textContent = "Running…";
    item.answer.hidden = true;
    item.li.dataset.state = "running";
    const trip = tripping(t, item);
    try {
      const seen = await t.act(trip.page);
      const out = t.answer(seen);
      results[t.id] = out;
      item.answer.querySelector(".try-answer-text").textContent = out.text;
      item.answer.hidden = false;
      item.status.textContent = trip.away()
        ? "Done: it ran in the workbench (chapter 1), where the run still is. The answer is below."
        : "Done. Look at the page, then open the answer.";
      item.li.dataset.state = "done";
      app.store.tried(t.id);
      trip.end({ status: "done", answer: out.text });
    } catch (err) {
      item.status.textContent = `It could not run: ${err.message}`;
      item.li.dataset.state = "error";
      trip.end({ status: "error", message: err.message });
    } finally {
      busy = false;
      for (const i of Object.values(items)) i.button.disabled = false;
    }
  }

  return {
    ready() {
      for (const i of Object.values(items)) i.button.disabled = false;
    },
    /** Run one suggestion by its id, as its button does; resolves with its answer. */
    async run(id) {
      await go(TRIES.find((t) => t.id === id));
      return results[id];
    },
    results,
  };
}
