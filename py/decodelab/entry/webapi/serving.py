"""The serving chapter (`lesson.serving`): a workload served from a paged cache with a prefix
tree and continuous batching, checked and planned by serving_start ({"dataset", "tokenizer",
"requests", "block_size", "seed", "memory_blocks", "max_running", "parallel_samples",
"workload"}), made a few scheduler steps at a time by serving_advance (progress, Stop); the
result has a frame per step."""

from decodelab.entry.webapi.registry import experiment
from decodelab.lesson.serving import Serving

experiment("serving", Serving, "No serving run has been started.")
