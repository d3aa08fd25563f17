// The chapter Tools and answers with a shape's suggestions: a tool call and who writes the
// result, and the model guessing it (a call with tools off is in tries/ends.js).

import { plural } from "../../ui/render.js";
import { onScreen } from "../../embed/presence.js";

// What the live cache check of a run with a tool call found, in words that follow its numbers.
function checkSentence(steps) {
  const checked = steps.filter((s) => s.cache_diff != null);
  if (!checked.length) return "The cache check was off, so nothing was compared.";
  const bad = checked.find((s) => !s.cache_ok);
  return bad ? `The cache check failed at step ${bad.step + 1}.` : `The cache check passed at all ${checked.length} steps the model took, across the resume.`;
}

export const TRIES = [
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
];
