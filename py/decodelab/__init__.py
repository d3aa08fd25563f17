"""decodelab: see how a language model turns logits into text.

The package is plain numpy so that the same code runs natively (CLI, training, tests) and in
the browser under Pyodide. Its parts, the three layers importing only downward (core, then
pretrained, then lesson, then entry):

    errors      FieldError and friends (imports nothing, so every layer can raise)
    fields      every input: its label, help and allowed values, the one checker
    core        the language-model machinery: tokens, the two models and the KV cache, every
                decoding rule (sampling), the generation loop (generate), the searches, the
                paged cache, the tasks data, and the library that loads what was built
    pretrained  a real model read from its GGUF file (SmolLM2-135M-Instruct): the file
                format, its tokenizer and chat template, and its weights as a core model
    lesson      the analyses the lesson's panels read, one module per panel
    entry       the ways in: the command line (decodelab.entry.cli, behind
                ``python -m decodelab``) and the page's worker (decodelab.entry.webapi)

docs/architecture.md has the map of every module, and what to touch to add a rule or a panel.
"""

__version__ = "0.1.0"
