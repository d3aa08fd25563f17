// Every rule in order, at the selected step of the run on screen: the step view's expansion,
// worked out only while it is open (Python's explain_step, drawn by stages.js).

import { PipelineView } from "./stages.js";
import { $, el } from "../ui/dom.js";
import { plural, spoken } from "../ui/render.js";

const unit = (d) => (d.tokenizer === "bpe" ? "token" : "character");
const PHASE_WORDS = {
  prefill: (d) => (d.prompt_length ? `prefill: the model read the ${plural(d.prompt_length, unit(d), `${unit(d)}s`)} of the prompt` : "prefill: the model started a new sequence (empty prompt)"),
  decode: (d) => (d.after_tool
    ? `decode: the model read its call’s closing token and the tool’s result, ${d.after_tool} tokens appended to the cache in one pass`
    : `decode: the model was fed ${spoken(d.fed)}, the ${unit(d)} chosen one step before`),
};

/**
 * The "pipeline" card: asks Python for the stages of the selected step once a run is over,
 * one request at a time (the newest selection wins), and draws them.
 */
export function createStepPipeline({ call }) {
  const card = $("pipeline");
  const empty = $("pipeline-empty");
  const body = $("pipeline-body");
  const where = $("pipeline-step");
  const phase = $("pipeline-phase");
  const view = new PipelineView($("pipeline-view"), {
    prefix: "pl",
    noun: "character",
    caption: (d, order) => `Step ${d.step + 1}: the ${d.rows.length} likeliest candidates at each stage (${order})`,
  });
  let wanted = null; // {run, index} asked for and not sent yet
  let asking = null; // {run, index} sent, reply not back yet
  let shown = null; // {run, index} on screen
  let current = null; // the run on screen

  const same = (a, run, index) => a && a.run === run && a.index === index;

  function setState(name) {
    card.dataset.state = name;
  }

  function fail(message) {
    empty.textContent = message;
    empty.hidden = false;
    body.hidden = true;
    shown = null;
    setState("error");
  }

  async function pump() {
    while (wanted && !asking) {
      asking = wanted;
      wanted = null;
      const { run, index } = asking;
      let reply = null;
      let error = null;
      try {
        reply = await call("explain_step", { step: index });
      } catch (err) {
        error = err;
      }
      asking = null;
      if (run !== current || run.selected !== index) continue; // something newer came
      const data = reply;
      if (error || !data || !data.ok) {
        fail(error ? `The stages could not be computed: ${error.message}`
          : (data && data.errors || []).map((e) => e.message).join(" ") || "The stages could not be computed.");
        continue;
      }
      where.textContent = `Step ${data.step + 1} of ${data.steps}`;
      if (data.source === "tool") { // appended by the program: no rule was applied to it
        empty.textContent = `Step ${data.step + 1} was not chosen by any rule: the program appended ${spoken(data.token_text)} after the model’s tool call (${data.tool_call ? `“${data.tool_call.call}”` : "the call"}), and fed it to the model with the rest of the result in one pass. Select one of the model’s steps to see its stages.`;
        empty.hidden = false;
        body.hidden = true;
        shown = { run, index };
        card.dataset.step = String(data.step);
        setState("tool");
        continue;
      }
      phase.replaceChildren(el("span", `pl-phase ${data.phase}`, data.phase), ` ${PHASE_WORDS[data.phase](data).replace(/^\w+: /, "")}.`);
      view.show(data);
      empty.hidden = true;
      body.hidden = false;
      shown = { run, index };
      card.dataset.step = String(data.step);
      setState("ready");
    }
  }

  // The rules in order are the step view's expansion: worked out only while it is open.
  function follow(run) {
    current = run;
    if (!card.open || !run || !run.done || run.selected == null) return;
    const index = run.selected;
    if (same(shown, run, index) || same(wanted, run, index)) return;
    if (same(asking, run, index)) {
      wanted = null; // the request on its way is the one we want
      return;
    }
    wanted = { run, index };
    setState("loading");
    pump();
  }
  card.addEventListener("toggle", () => follow(current));

  return {
    runStarted(run) {
      current = run;
      wanted = null;
      shown = null;
      body.hidden = true;
      empty.hidden = false;
      empty.textContent = "Generating… When the run is over, the stages of the selected step appear here.";
      where.textContent = "";
      delete card.dataset.step;
      setState("waiting");
    },
    selected: follow,
  };
}
