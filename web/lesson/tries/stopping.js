// The chapter Stopping and tokens' suggestions: how much text a BPE step adds, a stop string
// inside a token, a prompt that ends in a space and token healing.

import { pct, plural, quoted } from "../../ui/render.js";

/** What a step's likeliest candidates that start with a space held, in words. */
export function spacedWords(top) {
  const spaced = top.filter((c) => c.token_text.startsWith(" "));
  const mass = spaced.reduce((t, c) => t + c.p_raw, 0);
  if (!spaced.length) return `not one of its ${top.length} likeliest candidates starts with a space`;
  return `the ${spaced.length} of its ${top.length} likeliest candidates that start with a space held only ${pct(mass)}`;
}

export const TRIES = [
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
        text: `${plural(r.steps.length, "step", "steps")} wrote ${plural(chars, "character", "characters")}: ${(chars / Math.max(1, r.steps.length)).toFixed(1)} per step on average, where the character models add exactly one. The longest token was ${quoted(longest)}. The shaded tiles in the text are the tokens; most words come with the space in front of them.`,
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
          ? `Inside one. The “e” came in the token ${quoted(at.token_text)} (step ${last.stop_at.step + 1}), and the text stops after ${plural(last.stop_at.byte, "byte", "bytes")} of its ${n}: the token is cut in two, and the rest is struck out after the text. A stop string is a rule about text, not about tokens.`
          : `Between two tokens this time: the “e” began token ${quoted(at.token_text)}. Try another seed: usually it falls inside a token.`,
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
      return {
        text: `Without healing, the prompt ends in a lone space token, and the model’s first token was ${quoted(a.token_text)} at ${pct(Math.exp(a.logprob))}; ${spacedWords(a.top)}, because in training a space almost never stands alone before a word. With healing, that space is taken back and the first token must start with it: the model chose ${quoted(b.token_text)} at ${pct(Math.exp(b.logprob))}, a word with its space, the way it saw words in training.`,
        evidence: [["#text-prompt", "The man"]],
      };
    },
  },
];
