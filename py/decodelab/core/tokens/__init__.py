"""Text and token ids: characters, byte-level BPE (learned here), the tokenizer a model file
holds, and the corpora they read."""
