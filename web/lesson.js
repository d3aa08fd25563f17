// The lesson around the workbench: step-through, the pipeline of the selected step, the
// playground, the temperature experiment and the questions. app.js creates it once and tells
// it about the few moments that matter (ready, a run started, a step selected, a run done);
// everything else each part does on its own.

import { createExperiment } from "./experiment.js";
import { createStepPipeline } from "./pipeline.js";
import { createPlayground } from "./playground.js";
import { createQuestions } from "./questions.js";
import { createStepper } from "./stepper.js";

/**
 * app: { call(endpoint, request) -> Promise of Python's answer, select(index) (selects a step of the
 * run on screen), collect() -> {settings} | {errors} (the form, checked, errors shown) }.
 */
export function createLesson(app) {
  const stepper = createStepper(app);
  const pipeline = createStepPipeline(app);
  const playground = createPlayground(app);
  const experiment = createExperiment(app);
  const questions = createQuestions({ playground });
  return {
    stepper,
    pipeline,
    playground,
    experiment,
    questions,
    // The numbers behind the pictures, for tests and hosts: one step of the run on screen, and
    // typed values (the playground's request).
    explain: (step) => app.call("explain_step", { step }),
    explainValues: (request) => app.call("explain_values", request),
    ready() {
      stepper.ready();
      experiment.ready();
      return playground.ready();
    },
    runStarted(run) {
      stepper.runStarted(run);
      pipeline.runStarted(run);
    },
    selected(run) {
      stepper.selected(run);
      pipeline.selected(run);
    },
    runDone(run) {
      stepper.runDone(run);
      pipeline.selected(run);
    },
  };
}
