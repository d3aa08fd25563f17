// The next token, under the rules being set: while the learner moves the temperature (or any
// other rule), Python applies the rules in the form to the logits of the step selected in the run
// on screen, or, before any run, to the logits at the end of the prompt (webapi `preview`), and
// this draws the likeliest candidates: what the model itself gives each (a thin mark) and what
// is left after the rules (the bar). Nothing is generated and nothing else changes.
//
// One request at a time: changes that come while one is on its way are folded into the next.

import { count, el, pct, readable, spoken } from "../ui/render.js";
import { onScreen } from "../embed/presence.js";
import { $ } from "../ui/dom.js";

const SHOWN = 8; // candidates drawn
const OWN_MODEL_PANELS = ["beam", "speculative"]; // panels that run the transformer whatever the workbench's model

export function createPreview(app) {
  const dom = { box: $("next"), where: $("next-where"), bars: $("next-bars"), say: $("next-say") };
  let asking = false;
  let again = false;
  let frame = 0;

  // Where it sits: in the sticky column beside the controls on a wide screen, right after the
  // filters on a narrow one (the sticky band there is kept small), so it is in view while a rule
  // is moved either way.
  const wide = matchMedia("(min-width: 60rem)");
  const filters = dom.box.previousElementSibling;
  function place() {
    if (wide.matches) $("stage").append(dom.box);
    else filters.after(dom.box);
  }
  wide.addEventListener("change", place);
  place();

  function wanted() {
    const run = app.run();
    const step = run && run.done && run.selected != null ? run.selected : null;
    return { run, step };
  }

  async function ask() {
    if (!app.info()) return;
    if (asking) {
      again = true;
      return;
    }
    const settings = app.settings();
    const { run, step } = wanted();
    if (step != null && run.steps[step] && run.steps[step].source === "tool") {
      dom.box.dataset.state = "tool";
      dom.where.textContent = `Step ${step + 1} was appended by the tool, not chosen: no rule applies to it. Select one of the model’s steps to see its next token under the rules.`;
      return;
    }
    asking = true;
    let reply;
    try {
      reply = await app.call("preview", { settings: app.store.values(), step });
    } catch (err) {
      reply = { ok: false, errors: [{ message: err.message }] };
    }
    asking = false;
    if (again) {
      again = false;
      ask();
      return;
    }
    if (!reply.ok && reply.errors.every((e) => e.pending)) { // the real model, not loaded yet
      dom.box.dataset.state = "waiting";
      dom.where.textContent = "The next token shows here once the model is loaded (Load the model, on its card).";
      dom.bars.replaceChildren(); // (the candidates drawn were another model's)
      dom.say.textContent = "";
      return;
    }
    if (!reply.ok) { // Python refused the settings: each error is (or will be) next to its field
      dom.box.dataset.state = "invalid";
      const named = reply.errors.map((e) => e.field);
      dom.where.textContent = named.length && named.every((name) => app.store.state.names.includes(name) && onScreen("controls", name))
        ? "Fix the setting marked above to see the next token again."
        : `This widget's settings cannot be used: ${reply.errors.map((e) => e.message).join(" ")}`;
      return;
    }
    draw(reply, run, step, settings);
  }

  function draw(data, run, step, settings) {
    dom.box.dataset.state = "ready";
    const prompt = settings.prompt || "";
    const where = step != null
      ? `At step ${step + 1} of the last run, with the rules as they are set now.`
      : prompt ? `After the prompt “${readable(prompt)}”, before any run.` : "At the start of a new sequence (empty prompt), before any run.";
    // beside a panel that runs a model of its own (chapter 6's searches run the transformer), a
    // widget without the model's control says which model these bars are
    const naming = !onScreen("controls", "model") && OWN_MODEL_PANELS.some((panel) => onScreen(panel));
    dom.where.textContent = naming ? `${modelName(settings.model)}. ${where}` : where;
    const pipe = data.pipelines[data.order];
    const model = pipe.stages[0].p; // softmax of the model's logits (after any EOS block or penalty)
    const rows = data.rows.slice(0, SHOWN);
    dom.bars.replaceChildren(...rows.map((row, i) => {
      const line = el("div", pipe.final.kept[i] ? "next-row" : "next-row is-out");
      const track = el("span", "next-track");
      const fill = el("span", "next-fill");
      fill.style.setProperty("--w", `${pipe.final.p[i] * 100}%`);
      const mark = el("span", "next-model");
      mark.style.setProperty("--x", `${model[i] * 100}%`);
      track.append(fill, mark);
      line.append(el("span", "next-tok", readable(row.token_text)), track,
        el("span", "next-p", pipe.final.kept[i] ? pct(pipe.final.p[i]) : "cut"));
      return line;
    }));
    const kept = pipe.final.kept_count;
    const top = rows[0];
    dom.say.textContent = `${data.greedy ? `Greedy takes ${spoken(top.token_text)}, the likeliest.` : `${count(kept)} of ${count(data.vocab_size)} candidates can be drawn.`} ` +
      rows.map((row, i) => `${spoken(row.token_text)}: model ${pct(model[i])}, after the rules ${pipe.final.kept[i] ? pct(pipe.final.p[i]) : "cut"}`).join("; ") + ".";
    dom.box.dataset.kept = String(kept);
  }

  function modelName(id) {
    const model = (app.info().models || []).find((m) => m.id === id);
    return `The model: ${model ? model.label || model.id : id}`;
  }

  return {
    /** The settings or the selected step changed: draw again at the next frame. */
    update() {
      if (frame) return;
      frame = requestAnimationFrame(() => {
        frame = 0;
        ask();
      });
    },
    /** The latest drawing, for tests: the request on its way, then the bars. */
    get busy() {
      return asking || Boolean(frame);
    },
  };
}
