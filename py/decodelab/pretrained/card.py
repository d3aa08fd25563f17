"""The site's real model as the page describes it before its file is read: its name in a
sentence, what it learned from and the tokens it knows. Words only, importing nothing, so the
page has them at start-up (webapi.catalog) without loading the reader; the model itself declares
the same name (`model.PretrainedModel.label`). What it is in one sentence is the Model field's
(`fields.FIELDS`), beside the trained models'.
"""

LABEL = "SmolLM2"  # its name in a sentence, and who answers in a chat
TITLE = "SmolLM2-135M-Instruct"  # its full name, as its makers give it
# what the dataset hint says for it: its data is not one of the datasets here
DATA = ("Not trained here: it learned from Hugging Face\u2019s own mix of web text, code and "
        "maths, and writes any text its tokenizer can spell.")
# what choosing it costs, said before the learner loads it (the file's 98,362,432 bytes;
# the memory each engine's weights and runs hold, measured in the page: engines.WORDS)
COST = ("a 94 MiB download, kept in this browser for the next visit, and 0.25 to 0.6 GiB of "
        "memory once read, by the engine chosen below")
VOCAB_SUMMARY = "Tokens this model knows (49,152)"
VOCAB_WORDS = ("Any text: byte-level BPE with 17 special tokens, such as <|im_start|> and "
               "<|im_end|>, that typed text never produces.")


def card() -> dict:
    """The words the page draws for it: {"name", "title", "data", "cost", "vocab_summary",
    "vocab_words"}."""
    return {"name": LABEL, "title": TITLE, "data": DATA, "cost": COST,
            "vocab_summary": VOCAB_SUMMARY, "vocab_words": VOCAB_WORDS}
