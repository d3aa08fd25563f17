// The chapter The KV cache's suggestions: a context shift read again or turned back, both
// models side by side, a broken cache, the memory calculator.

import { plural, quoted } from "../../ui/render.js";
import { sci } from "../../ui/plot.js";
import { bytes } from "../../ui/bytes.js";

export const TRIES = [
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
        text: `Same prompt, same seed: the bigram wrote ${quoted(bigram.text)}, the transformer ${quoted(transformer.text)}. Held-out loss, the average surprise at the next character of names neither saw in training: bigram ${lossB.toFixed(2)}, transformer ${lossT.toFixed(2)} nats per character. The ${better} predicts unseen names better; the bigram sees only the last character, the transformer all of them.`,
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
      return {
        text: `Llama 2 70B shares 8 KV heads among its 64 query heads: ${both.bytes_per_token.toLocaleString("en")} bytes per token, so 8 sequences of 4096 tokens hold ${bytes(both.total_bytes)} of keys and values, before any weights. With 64 KV heads, one per query head, it is ${bytes(mha.total_bytes)}: ${Math.round(mha.total_bytes / both.total_bytes)} times as much. That saving is why large models use grouped-query attention.`,
        evidence: [["#mem-formula", mha.total_bytes.toLocaleString("en")]],
      };
    },
  },
];
