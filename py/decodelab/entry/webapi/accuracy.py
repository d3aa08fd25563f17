"""Right answers against temperature (`lesson.accuracy`): planned by accuracy_start, run in
time-boxed batches by accuracy_advance."""

from decodelab.entry.webapi.registry import experiment
from decodelab.lesson.accuracy import AccuracyExperiment

experiment("accuracy", AccuracyExperiment, "No accuracy experiment has been started.")
