// The lesson around the workbench: the next token under the rules being set, the step view's
// timeline and its rules in order, the playground, the temperature experiment, tool calls (what
// a cache is not, right answers against temperature), answers with a shape (JSON), Try this, the
// runs kept for comparing, and the questions. app.js creates it once and tells it about the few
// moments that matter (ready, the settings changed, a run started, a step selected, a run done);
// everything else each part does on its own.

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
 * app: { call(endpoint, request) -> Promise of Python's answer, select(index) (selects a step of
 * the run on screen), collect() and peek() -> {settings} | {errors} (the form checked, with its
 * errors shown or not), run() (the run on screen), info() (what Python sent at start-up),
 * apply(values) (puts settings into the form), generate() -> Promise of the run's end, kv() (the
 * KV-cache panels) }.
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
      experiment.ready();
      accuracy.ready(app.info());
      reuse.ready(app.info());
      shapes.ready(app.info());
      prefill.ready();
      tries.ready();
      preview.update();
      return playground.ready();
    },
    settingsChanged() {
      preview.update();
    },
    runStarted(run) {
      stepper.runStarted(run);
      pipeline.runStarted(run);
    },
    selected(run) {
      stepper.selected(run);
      pipeline.selected(run);
      preview.update();
    },
    runDone(run) {
      stepper.runDone(run);
      pipeline.selected(run);
      runs.add(run);
      preview.update();
    },
  };
}
