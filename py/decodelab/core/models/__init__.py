"""The models trained here and what runs them: the bigram, the transformer's layers (forward and
backward), its training and recipes, the KV cache and the cached forward with its sessions."""
