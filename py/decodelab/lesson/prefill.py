"""A forward pass is not yet an answer: the prefill's logits at every position, row by row.

Reading a prompt of T tokens (EOS first, as generation feeds it) gives a tensor of logits of
shape [B, T, V]: batch, positions, vocabulary. Row t scores the token after position t. For
every row but the last, that token is already known (it is the prompt's next token), so the row
only says how surprised the model would have been; the last row is the only one about a token
nobody knows yet, and the decoding rules choose the next token from it alone.

`rows` lays this out: each row's likeliest next token against the token that actually follows.

Dimension legend: T positions read, V vocabulary size.
"""

import numpy as np

from decodelab.core.models.layers import window_start

MAX_ROWS = 32  # rows shown: the last ones (a long prompt's first rows are summarised)


def rows(model, prompt_ids, max_rows: int = MAX_ROWS) -> dict:
    tokens = list(model.tokenizer.start_ids) + [int(i) for i in prompt_ids]
    context = model.context_size
    tokens = tokens[window_start(len(tokens), max(context, 1)):] if context > 1 else tokens
    logits = np.asarray(model.all_logits(tokens), dtype=np.float64)  # (T, V)
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))  # (T, V) log-softmax per row
    T, V = logp.shape
    best = logp.argmax(axis=1)  # (T,)
    label = model.tokenizer.label
    out = []
    for t in range(max(0, T - max_rows), T):
        row = {"position": t, "reads": label(tokens[t]), "top": label(int(best[t])),
               "top_p": float(np.exp(logp[t, best[t]]))}
        if t + 1 < T:  # the token that follows is known: how likely the model found it
            nxt = tokens[t + 1]
            row.update(next=label(nxt), next_p=float(np.exp(logp[t, nxt])),
                       next_rank=int((logp[t] > logp[t, nxt]).sum()) + 1,
                       hit=bool(best[t] == nxt))
        out.append(row)
    known = T - 1
    return {"shape": [1, T, V], "rows": out, "hidden_rows": max(0, T - max_rows),
            "hits": int(sum(best[t] == tokens[t + 1] for t in range(known))), "known": known}
