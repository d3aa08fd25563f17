"""decodelab: see how a language model turns logits into text.

The package is plain numpy so that the same code runs natively (CLI, training, tests) and in
the browser under Pyodide. One module per concept:

    tokenizer  characters <-> token ids, with an end-of-sequence symbol
    corpus     sequences of text, the deterministic train/validation split
    bigram     a count-based bigram model (the first of the two models)
    sampling   pure decoding rules: temperature, top-k, top-p, min-p, penalties, the draw
    stopping   stop strings matched across token boundaries, with streaming hold-back
    settings   every user-facing setting, its allowed values and its validation
    generate   the generation loop: a Python generator yielding one record per step
    assets     where trained models and corpora live, and loading them
    webapi     JSON-in, JSON-out functions that the browser worker calls
    cli        ``python -m decodelab``
"""

__version__ = "0.1.0"
