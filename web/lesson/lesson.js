// The lesson around the workbench: the next token under the rules being set, the step view's
// timeline and its rules in order, the playground, the temperature experiment, tool calls (what
// a cache is not, right answers against temperature), answers with a shape (JSON), Try this, the
// runs kept for comparing, and the questions. app.js creates it once and tells it when Python is
// ready; the moments of a run it hears from the store, and everything else each part does on
// its own.

import { createAccuracy } from "./accuracy.js";
import { createExperiment } from "./experiment.js";
import { createStepPipeline } from "./pipeline.js";
import { createPlayground } from "./playground.js";
import { createPrefill } from "./prefill.js";
import { createPreview } from "./preview.js";
import { createQuestions } from "./questions.js";
import { createReuse } from "./reuse.js";
import { createRuns } from "./runs.js";
import { createShapes } from "./shapes.js";
import { createStepper } from "./stepper.js";
import { createTries } from "./tries.js";

/**
 * app: { store, call(endpoint, request) -> Promise of Python's answer, select(index) (selects a
 * step of the run on screen), collect() -> Promise of {settings} | {errors} (the form checked by
 * Python, its errors shown), settings() (the form's settings as held), run() (the run on screen),
 * info() (what Python sent at start-up), apply(values) (puts settings into the form), generate()
 * -> Promise of the run's end, kv() (the KV-cache panels), text (the generated text) }.
 */
export function createLesson(app) {
  const preview = createPreview(app);
  const stepper = createStepper(app);
  const pipeline = createStepPipeline(app);
  const playground = createPlayground(app);
  const experiment = createExperiment(app);
  const accuracy = createAccuracy(app);
  const reuse = createReuse(app);
  const shapes = createShapes(app);
  const prefill = createPrefill(app);
  const runs = createRuns(app);
  const tries = createTries({ ...app, runs });
  const questions = createQuestions({ playground });

  // The few moments that matter to the lesson: the rules changed, a run started, it streamed
  // (the timeline follows ten times a second), a step was selected, the run ended.
  let followedAt = 0;
  app.store.subscribe((change) => {
    switch (change.type) {
      case "settings":
      case "run-cleared": // the next token at the end of the prompt, for the model chosen now
        return preview.update();
      case "run-start":
        followedAt = 0;
        stepper.runStarted(change.run);
        pipeline.runStarted(change.run);
        return selected(change.run);
      case "steps": {
        const now = performance.now();
        if (!change.run.follow || now - followedAt >= 100) {
          followedAt = now;
          selected(change.run);
        }
        return;
      }
      case "select":
        return selected(change.run);
      case "run-end":
        if (!change.run.finish) return; // cut off by a failure: nothing to replay
        stepper.runDone(change.run);
        pipeline.selected(change.run);
        runs.add(change.run);
        preview.update();
        return selected(change.run);
      default:
    }
  });

  function selected(run) {
    stepper.selected(run);
    pipeline.selected(run);
    preview.update();
  }

  return {
    preview,
    stepper,
    pipeline,
    playground,
    experiment,
    accuracy,
    reuse,
    shapes,
    runs,
    tries,
    questions,
    last: app.last, // each panel's latest reply from Python (the prefill's rows)
    // The numbers behind the pictures, for tests and hosts: one step of the run on screen, and
    // typed values (the playground's request).
    explain: (step) => app.call("explain_step", { step }),
    explainValues: (request) => app.call("explain_values", request),
    ready() {
      stepper.ready();
      experiment.ready(app.info());
      accuracy.ready(app.info());
      reuse.ready(app.info());
      shapes.ready(app.info());
      prefill.ready();
      tries.ready();
      preview.update();
      return playground.ready();
    },
  };
}
