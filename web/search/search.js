// The search chapter: beam search (beam.js, its tree in tree.js) and speculative decoding with
// its acceptance experiment (speculative.js). Both run the workbench's settings with the
// transformer, through Python's lesson.search; app.js creates it once.

import { createBeam } from "./beam.js";
import { createSpeculative } from "./speculative.js";

export function createSearch(app) {
  const beam = createBeam(app);
  const speculative = createSpeculative(app);
  return {
    beam, speculative,
    last: app.last, // each panel's latest reply from Python (tests read it)
    ready() {
      beam.ready();
      speculative.ready();
    },
  };
}
