"""decodelab: see how a language model turns logits into text.

The package is plain numpy so that the same code runs natively (CLI, training, tests) and in
the browser under Pyodide. One module per concept:

    fields      every input: its label, help and allowed values, the one checker, FieldError
    settings    the settings of one generation run, validated against the fields
    tokenizer   characters <-> token ids, with an end-of-sequence symbol
    bpe         byte-level BPE: learned merges of bytes, any text in, exactly back out
    corpus      sequences of text, the deterministic train/validation split
    bigram      a count-based bigram model (the first of the two models)
    transformer a tiny transformer: forward and hand-written backward, loss, the model object
    kvcache     the KV cache itself (preallocated keys and values) and its memory arithmetic
    inference   generating with the transformer: cached forward, sessions, batches, the check
    train       training the transformer in numpy (AdamW), cached by a hash of what decides it
    sampling    every decoding rule, once, and `decide`: the stages of one step
    stopping    stop strings matched across token boundaries, with streaming hold-back
    healing     token healing: take back the prompt's last token, mask the first step
    prefill     the prefill's rows: what each position of the prompt predicted
    tasks       the tasks data: arithmetic questions answered with a calculator call
    tools       the calculator: a small grammar for calls, never eval
    records     card questions answered with one JSON object, and their grader
    jsonshape   JSON read a byte at a time: valid, incomplete (and why) or malformed (where)
    grammar     JSON mode: the grammar's mask over the vocabulary, per parser state
    generate    the generation loop: a Python generator yielding one record per step
    pipeline    one step laid out stage by stage for the page, and replaying a run's logits
    playground  the rules on numbers you type (the CLI's `probs`, the page's playground)
    metrics     measures of generated text, and the temperature experiment
    ask         one question to the tasks model: its answer, calls, grade and JSON status
    accuracy    right answers against temperature, with Wilson intervals
    validity    valid JSON against budget and temperature, with and without JSON mode
    batch       several prompts in one padded batch, each row held to its prompt alone
    bugs        five classic KV-cache bugs, injected on purpose for the lesson
    costs       what a cache costs: memory for real model shapes, time per step measured
    assets      where trained models and corpora live, and loading them
    webapi      the browser worker's entry point: JSON in, JSON out, one session per page
    cli         ``python -m decodelab``
"""

__version__ = "0.1.0"
