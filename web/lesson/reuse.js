// What a cache is not: one cached question reused twice by the tasks model (webapi reuse_check),
// after appending tokens (valid) and after changing a digit of the question (not valid), each
// compared with a full recomputation of the text it claims to hold.

import { sci } from "../ui/plot.js";
import { el } from "../ui/render.js";
import { $ } from "../ui/dom.js";

export function createReuse({ call }) {
  const button = $("reuse-run");
  const status = $("reuse-status");
  const out = $("reuse-out");
  let last = null;

  function row(ok, title, words) {
    const div = el("div", `reuse-row ${ok ? "is-ok" : "is-bad"}`);
    div.append(el("p", "reuse-verdict", `${ok ? "✓" : "✕"} ${title}`), el("p", null, words));
    return div;
  }

  async function run() {
    button.disabled = true;
    status.textContent = "Running the model…";
    try {
      const r = await call("reuse_check", {});
      if (!r.ok) throw new Error((r.errors || []).map((e) => e.message).join(" "));
      last = r;
      const a = r.append;
      const e = r.edit;
      const appended = r.appended_tokens.join("");
      out.replaceChildren(
        row(a.ok, `Appended after the cache: the check passes (largest difference ${sci(a.diff)}).`,
          `The cache of “${r.question}” (${r.prompt_length} tokens, its markers included) was kept, and “${appended}” (${r.appended} tokens) went through the model in one pass. The logits agree with reading the whole text from scratch to within ${sci(r.tolerance)}: every cached key and value still belongs to the same earlier token. This is what happens when a tool’s result is appended.`),
        row(e.ok, `Changed an earlier token: the check fails (largest difference ${sci(e.diff)}, tolerance ${sci(r.tolerance)}).`,
          `The question now reads “${r.edited_question}” (token ${e.position + 1}: “${r.old_text.trim()}” became “${r.new_text.trim()}”), but the cache still holds the key and value computed for the old token, and for every token after it, which attended to it. Feeding the same ${r.appended} tokens gives logits that differ from a full recomputation of the edited text by ${sci(e.diff)}${e.same_top ? "; the likeliest next token happens to agree here, but the probabilities do not" : ", enough to change the likeliest next token"}. A cache is valid only for the exact tokens that made it: after any edit, everything from the edit on must be computed again.`));
      out.hidden = false;
      status.textContent = "";
    } catch (err) {
      status.textContent = `It could not run: ${err.message}`;
    } finally {
      button.disabled = false;
    }
  }

  button.addEventListener("click", run);
  return {
    ready(info) {
      button.disabled = !(info.datasets && info.datasets.tasks && info.datasets.tasks.tools);
      if (button.disabled) status.textContent = "This site was built without the tasks model.";
    },
    run,
    last: () => last,
  };
}
