"""Token healing: take back the prompt's last token and let the first new token redo it.

A prompt is cut into tokens without knowing what comes next. "The cat " ends in a token that is
just a space, while the corpus almost always has the space glued to the word after it (" sat"
is one token). A model that sees a lone space at the end has rarely seen anything follow it, so
it avoids its likeliest words. Healing removes that last token from the prompt and allows, at
the first step only, just the tokens whose bytes start with the bytes taken back: " sat" is
allowed, "sat" is not, and the removed token itself is allowed too (so nothing is lost). The
generated text then leaves out the bytes the prompt already had.

This is Hugging Face's semantics (generate(..., token_healing=True)) for one removed token.

Dimension legend: V vocabulary size.
"""

from dataclasses import dataclass

import numpy as np

from decodelab.core.tasks import data as tasks
from decodelab.errors import FieldError
from decodelab.fields import encode


@dataclass(frozen=True)
class Healing:
    prompt_ids: list  # the prompt without its last token: what the model is fed
    removed: int  # the id taken back
    prefix: bytes  # its bytes: the first new token must start with them
    allowed: np.ndarray  # (V,) the tokens that do
    why: str  # what the masked tokens fail, in words

    def strip(self, token_bytes: bytes) -> bytes:
        """The first token's bytes without the part the prompt already shows."""
        return token_bytes[len(self.prefix):]


def prompt_ids(tokenizer, settings) -> tuple:
    """(the ids a run feeds for its prompt, its Healing or None): with token_healing, the
    prompt without its last token; for the tasks model, the question in its template.
    FieldError for a prompt the tokenizer cannot read, or an empty one to heal."""
    if tasks.has_template(tokenizer):  # a question model: the prompt is the question
        if settings.token_healing:
            raise FieldError("token_healing", "Token healing: the tasks model's prompt ends in "
                                              "the special token that opens the answer, which "
                                              "is not text to heal; turn it off.")
        return tasks.question_ids(tokenizer, settings.prompt), None
    ids = encode(tokenizer, "prompt", settings.prompt)
    if not settings.token_healing:
        return ids, None
    heal = plan(tokenizer, ids)
    return heal.prompt_ids, heal


def plan(tokenizer, prompt_ids) -> Healing:
    """Healing for an encoded prompt; a FieldError when there is no token to take back."""
    if not prompt_ids:
        raise FieldError("token_healing", "Token healing needs a prompt: it takes back the "
                                          "prompt's last token, and an empty prompt has none.")
    removed = int(prompt_ids[-1])
    prefix = tokenizer.token_bytes(removed)
    allowed = np.fromiter((tokenizer.token_bytes(i).startswith(prefix)
                           for i in range(tokenizer.vocab_size)), dtype=bool,
                          count=tokenizer.vocab_size)
    return Healing(list(prompt_ids[:-1]), removed, prefix, allowed,
                   f"does not start with {tokenizer.label(removed)!r}")
