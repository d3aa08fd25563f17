"""The analyses the page's lesson panels read, each named as its panel: one step taken apart
(pipeline), the rules on typed numbers (playground), the prompt's prefill row by row (prefill),
the temperature experiment (experiment), right answers against temperature (accuracy), answers
with a shape (shapes), the batch view (batch), break it on purpose (bugs), what the cache costs
(costs), and the experiments' shared planning (planned).

Each builds on `core` and decides nothing about decoding itself: it lays out what core decided.
"""

import decodelab.pretrained  # noqa: F401  (registers its reader with core's library)
