"""The errors every layer of decodelab raises for bad input, in one module that imports nothing.

A FieldError names the field at fault and carries a full sentence fit to show to a learner:
"Top-p must be a number greater than 0 and at most 1 (1 means off); got 1.5." FieldErrors holds
several at once, so a form can mark every bad field in one go. UnknownCharacters is what a
character tokenizer raises for text outside its vocabulary; `fields.encode` turns it into a
FieldError for the field the text came from.

They live apart from the field table (`fields`) and the tokenizers (`core.tokens.tokenizer`) so that
any module can raise them without importing either.
"""


class FieldError(ValueError):
    """Bad input for one field. ``message`` is a full sentence fit to show to a learner."""

    def __init__(self, field: str, message: str, also: tuple = ()):
        super().__init__(message)
        self.field = field
        self.message = message
        self.also = tuple(also)  # other fields the error is about (a pair that fails together)


class FieldErrors(ValueError):
    """Several bad fields at once, so a form can mark all of them in one go."""

    def __init__(self, errors: list):
        super().__init__("; ".join(e.message for e in errors))
        self.errors = errors


class UnknownCharacters(ValueError):
    """Text holds characters the vocabulary does not: `chars`, sorted, each once."""

    def __init__(self, chars: list):
        super().__init__("characters outside the vocabulary: " + " ".join(map(repr, chars)))
        self.chars = chars
