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
VOCAB_SUMMARY = "Tokens this model knows (49,152)"
VOCAB_WORDS = ("Any text: byte-level BPE with 17 special tokens, such as <|im_start|> and "
               "<|im_end|>, that typed text never produces.")


def card() -> dict:
    """The words the page draws for it: {"name", "title", "data", "vocab_summary",
    "vocab_words"}."""
    return {"name": LABEL, "title": TITLE, "data": DATA, "vocab_summary": VOCAB_SUMMARY,
            "vocab_words": VOCAB_WORDS}
