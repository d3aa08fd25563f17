// Train on your own text: a bigram counted by Python from what the learner pastes, which becomes
// the dataset "Your text" (its words and its count come from Python's answer).

import { $ } from "./dom.js";
import { fieldError, plural } from "./render.js";

export function createTraining(store, call) {
  const dom = { form: $("train-form"), text: $("train-text"), button: $("train-button"), result: $("train-result"), error: $("train-text-error") };
  let training = false;

  store.subscribe((change, state) => {
    if (change.type !== "phase") return;
    const on = state.phase === "ready" || state.phase === "generating";
    dom.text.disabled = !on;
    dom.button.disabled = !on || training;
  });

  function showError(message) {
    fieldError(dom.text, message, dom.error);
    dom.text.closest(".field").classList.toggle("has-error", Boolean(message));
    dom.text.setAttribute("aria-describedby", message ? "train-text-hint train-text-error" : "train-text-hint");
  }

  dom.form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!store.state.info || training) return;
    showError(null);
    training = true;
    dom.button.disabled = true;
    dom.result.textContent = "Counting…";
    call("train", { text: dom.text.value })
      .then((reply) => (reply.ok ? trained(reply.dataset) : refused(reply.errors)))
      .catch((err) => {
        dom.result.textContent = `Training failed: ${err.message}`;
      })
      .finally(() => {
        training = false;
        dom.button.disabled = false;
      });
  });

  function trained(d) {
    store.addDataset({ ...d, name: d.name || "custom", label: "Your text" });
    store.edit("dataset", d.name || "custom", { commit: true, source: "train" });
    const facts = [];
    if (d.n_train != null) facts.push(plural(d.n_train, "example", "examples"));
    if (Array.isArray(d.vocab)) facts.push(plural(d.vocab.length - 1, "character", "characters"));
    dom.result.textContent = `Trained${facts.length ? ` on ${facts.join(" with ")}` : ""}. The dataset is now “Your text”.`;
  }

  function refused(errors) {
    dom.result.textContent = "";
    showError(errors.map((e) => e.message).join(" ") || "This text cannot be used.");
    dom.text.focus();
  }
}
