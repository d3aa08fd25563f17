// The chapter Stopping and tokens' suggestions on why a run ends: each of the four ways, on one
// card question, and what each does to the JSON answer (the run's own verdict, trace.json).

import { finishCode, pct, plural, quoted } from "../../ui/render.js";

const CARD = "Card for “Ada”, age 31, from “Paris”.";
const ASK = { model: "transformer", dataset: "tasks", prompt: CARD, greedy: true, tools: "on", json_mode: false, stop: [], include_stop: false, ignore_eos: false, min_new_tokens: 0 };

// The run's JSON verdict, in words.
function verdict(r) {
  const json = r.json;
  if (!json) return "The page read no JSON answer in it.";
  if (json.status === "valid") return "The answer is valid JSON, one whole object.";
  if (json.status === "incomplete") return "The answer is incomplete JSON, valid as far as it goes: it was cut before the object closed, which is no fault of the model.";
  return `The answer is ${json.status} JSON: ${json.error}.`;
}

export const TRIES = [
  {
    id: "ends-eos",
    where: "ends",
    text: `Ask the arithmetic model for a card, greedy, with room to spare (60 new tokens): ${CARD} What ends the run, and who decided it?`,
    async act(page) {
      return page.run({ ...ASK, max_new_tokens: 60 });
    },
    answer(r) {
      const last = r.steps[r.steps.length - 1];
      if (r.stop_reason !== "eos") {
        return { text: `This time the run did not end at end-of-sequence: ${finishCode(r.finish_reason, r.stop_reason)}. ${verdict(r)}`, evidence: [["#finish-text", ""]] };
      }
      return {
        text: `The model did: after ${plural(r.steps.length - 1, "token", "tokens")} it gave end-of-sequence a probability of ${pct(last.prob)} at step ${r.steps.length}, the likeliest token there, and greedy took it (${finishCode(r.finish_reason, r.stop_reason)}). The end token is not shown: the text is ${quoted(r.text)}, with budget to spare. ${verdict(r)}`,
        evidence: [["#finish-text", "end-of-sequence"]],
      };
    },
  },
  {
    id: "ends-budget",
    where: "ends",
    text: "The same question with Max new tokens at 12, first as it is, then with JSON mode on. Is the answer wrong, and does JSON mode save it?",
    async act(page) {
      const plain = await page.run({ ...ASK, max_new_tokens: 12 });
      const masked = await page.run({ ...ASK, max_new_tokens: 12, json_mode: true });
      return { plain, masked };
    },
    answer({ plain, masked }) {
      if (plain.finish_reason !== "length") {
        return { text: `The model finished within 12 tokens this time (${finishCode(plain.finish_reason, plain.stop_reason)}), so the budget did not end it. ${verdict(plain)}`, evidence: [["#finish-text", ""]] };
      }
      const same = plain.text === masked.text;
      return {
        text: `The budget ended the run after ${plural(plain.steps.length, "token", "tokens")} at ${quoted(plain.text)} (${finishCode(plain.finish_reason, plain.stop_reason)}). ${verdict(plain)} With JSON mode on it ended ${masked.finish_reason === plain.finish_reason ? "the same way" : "another way"} (${finishCode(masked.finish_reason, masked.stop_reason)}) ${same ? "with the very same text, because greedy’s tokens were ones the mask allows anyway" : `at ${quoted(masked.text)}`}: a mask chooses among tokens and cannot add any. Raise the budget instead.`,
        evidence: [["#finish-text", "limit of 12 new tokens"], ["#json-verdict", "Incomplete"]],
      };
    },
  },
  {
    id: "ends-stop",
    where: "ends",
    text: "The same question with 60 new tokens and the stop string “,” (a comma, as one might set to end a list). Where does the answer end?",
    async act(page) {
      return page.run({ ...ASK, max_new_tokens: 60, stop: [","] });
    },
    answer(r) {
      if (r.finish_reason !== "stop" || r.stop_reason !== ",") {
        return { text: `No comma ended it this time (${finishCode(r.finish_reason, r.stop_reason)}). ${verdict(r)}`, evidence: [["#finish-text", ""]] };
      }
      return {
        text: `At its first comma, inside the object: the text is ${quoted(r.text)} and the comma itself is dropped (Include stop would keep it). ${verdict(r)} A stop string is a rule about text: it does not know it is in the middle of JSON.`,
        evidence: [["#finish-text", "stop string"], ["#json-verdict", "Incomplete"]],
      };
    },
  },
  {
    id: "ends-tool",
    where: "ends",
    text: "Now an arithmetic question, “What is 512 plus 399?”, greedy, with Tool calls off. What ends the run, and is that the end of the answer?",
    async act(page) {
      return page.run({ ...ASK, prompt: "What is 512 plus 399?", max_new_tokens: 40, tools: "off" });
    },
    answer(r) {
      if (r.finish_reason !== "tool_calls") {
        return { text: `The model made no call this time (${finishCode(r.finish_reason, r.stop_reason)}): the text is ${quoted(r.text)}.`, evidence: [["#finish-text", ""]] };
      }
      const close = r.steps.findIndex((s) => s.token_text === "<|/call|>");
      return {
        text: `The model ended its own turn: at step ${close + 1} it wrote the call’s closing token (${finishCode(r.finish_reason, r.stop_reason)}). That is not the end of the answer: the call is handed back unrun. With Tool calls on, the program runs it, appends the result, and the model goes on to write the answer (When the model calls a tool, chapter 4).`,
        evidence: [["#finish-text", "tool call"]],
      };
    },
  },
];
