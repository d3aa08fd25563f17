"""The temperature experiment (`lesson.experiment`): planned by experiment_start, run in
time-boxed batches by experiment_advance."""

from decodelab.entry.webapi.registry import experiment
from decodelab.lesson.experiment import Experiment

experiment("experiment", Experiment, "No experiment has been started.")
