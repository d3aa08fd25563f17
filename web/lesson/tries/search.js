// The chapter Beam search and drafts' suggestions: what the n-gram ban does to the best beam,
// and what the draft's length does to the passes of the model (never to a greedy text).

import { logp } from "../../search/beam.js";
import { fixed, pct, plural, quoted } from "../../ui/render.js";

// The workbench's settings these suggestions run on (shared with it, as the panels are).
const PROSE = { model: "transformer", dataset: "prose", prompt: "The ", max_new_tokens: 30 };
const REFUSED = "the panel’s fields need fixing first: see the messages next to them";

function words(reply) {
  const [beam, greedy] = reply.side;
  return { beam: logp(beam.logprob_per_token), greedy: logp(greedy.logprob_per_token), repeated: pct(beam.repeated_3gram) };
}

export const TRIES = [
  {
    id: "beam-ngram",
    where: "search",
    text: "On English prose from “The ”, search with 3 beams, length penalty 1 and No repeat n-gram 0, then 3. Is the best beam likelier per token than greedy’s text each time? Why not, when it is not?",
    async act(page) {
      await page.apply({ ...PROSE, greedy: false });
      const beam = page.search().beam;
      const free = await beam.runWith({ num_beams: 3, num_return_sequences: 1, length_penalty: 1, no_repeat_ngram_size: 0 });
      const banned = await beam.runWith({ num_beams: 3, num_return_sequences: 1, length_penalty: 1, no_repeat_ngram_size: 3 });
      if (!free?.ok || !banned?.ok) throw new Error(REFUSED);
      return { free, banned };
    },
    answer({ free, banned }) {
      const a = words(free);
      const b = words(banned);
      const first = free.why.likelier
        ? free.why.same.includes("greedy")
          ? `Without the ban the best beam is greedy’s own text (${a.beam} per token): with every path ${plural(free.side[0].tokens, "token", "tokens")} long, the search found nothing likelier`
          : `Without the ban the best beam scores ${a.beam} per token against greedy’s ${a.greedy}: likelier, which is what the search is for`
        : `Without the ban the best beam scores ${a.beam} per token against greedy’s ${a.greedy}`;
      const barred = banned.why.barred.includes("greedy");
      const second = banned.why.likelier
        ? `with it, ${b.beam} against ${b.greedy}: still the likelier`
        : `with it, ${b.beam} against greedy’s ${b.greedy}: ${barred ? "greedy’s text repeats a 3-gram, so the ban forbids the beams that very text, and every path they may take is less likely" : "less likely, though the ban does not forbid greedy’s text: the search dropped that path on the way"}`;
      return {
        text: `${first}; ${second}. Its repeated 3-grams go from ${a.repeated} to ${b.repeated}: the ban buys livelier text with likelihood, which is why likely text is not always good text.`,
        evidence: [["#beam-summary", b.beam]],
      };
    },
  },
  {
    id: "draft-greedy",
    where: "search",
    text: "With Greedy on, run the bigram draft on English prose with 1 draft token, then 4. Does the text change? How many tokens does each pass of the model bring?",
    async act(page) {
      await page.apply({ ...PROSE, greedy: true });
      const spec = page.search().speculative;
      const one = await spec.runWith({ draft: "bigram", num_draft_tokens: 1 });
      const four = await spec.runWith({ draft: "bigram", num_draft_tokens: 4 });
      if (!one?.ok || !four?.ok) throw new Error(REFUSED);
      return { one, four };
    },
    answer({ one, four }) {
      const same = (r) => r.trace.ids.length === r.plain.ids.length && r.trace.ids.every((id, i) => id === r.plain.ids[i]);
      const line = (r, gamma) => `${plural(gamma, "draft token", "draft tokens")}: ${fixed(r.trace.tokens_per_pass, 2)} tokens per pass, ${pct(r.trace.acceptance_rate)} of the guesses kept`;
      const text = same(one) && same(four)
        ? `Both texts are the model’s own greedy text, token for token (${quoted(four.trace.text)}): a guess is kept only when it is the model’s likeliest token, so the draft changes how many passes it takes, never what is written.`
        : "A greedy text with a draft should equal the model’s own, and here one does not: that would be a bug.";
      return {
        text: `${line(one, 1)}; ${line(four, 4)}. ${text} Longer drafts bring more tokens per pass only while the guesses keep being right: every guess after the first turned down is wasted work.`,
        evidence: [["#spec-summary", fixed(four.trace.tokens_per_pass, 2)]],
      };
    },
  },
];
