"""The language-model machinery, numpy only: text and tokens (tokenizer, bpe, corpus), the two
models (bigram; transformer with layers, its KV cache, cached forward and sessions, trained by train), the
decoding rules (sampling, stopping, healing, grammar and jsonshape), the generation loop
(generate, with textout, toolcalls and replay), the settings of a run, the tasks model's world
(tasks, records, tools, ask), and the library that loads what was built.

Nothing here knows about the page or the command line; `lesson` and `entry` build on it.
"""
