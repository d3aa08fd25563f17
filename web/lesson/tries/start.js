// The workbench's suggestion: the budget, and the finish reason it gives.

import { finishSentence, plural, quoted } from "../../ui/render.js";
import { onScreen } from "../../embed/presence.js";

export const TRIES = [
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
        text: `The first run wrote ${quoted(first.text)}: ${said(first)} With the prompt “jo”: ${jo.map((r) => `seed ${r.settings.seed} ${quoted(`jo${r.text}`)} (${r.finish_reason === "length" ? "budget" : "end-of-sequence"})`).join(", ")}. ${cut ? `${plural(cut, "run", "runs")} hit the budget: a name cut off there is a resource limit, not the model deciding the name is done.` : "None hit the budget: each name ended because the model chose end-of-sequence."} ${onScreen("text") ? "The last one is the text on screen in the workbench, with its finish reason." : ""}`,
        evidence: [["#finish-text", said(jo[jo.length - 1])], ["#text-gen", jo[jo.length - 1].text]],
      };
    },
  },
];
