"""The one error type every layer uses for bad input: it names the field and what is allowed.

The CLI turns it into ``--option ...`` on stderr with exit status 2; the browser worker turns it
into a message shown next to the control. Keeping the field name machine-readable is what lets
both places point at the right input.
"""


class FieldError(ValueError):
    """Bad input for one field. ``message`` is a full sentence fit to show to a learner."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message

    def to_json(self) -> dict:
        from decodelab.settings import label_of

        return {"field": self.field, "label": label_of(self.field), "message": self.message}


class FieldErrors(ValueError):
    """Several bad fields at once, so a form can mark all of them in one go."""

    def __init__(self, errors: list):
        super().__init__("; ".join(e.message for e in errors))
        self.errors = errors
