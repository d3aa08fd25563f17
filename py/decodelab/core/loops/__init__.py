"""The loops that turn logits into text: generation (one record per step), its replay, the live
cache check, beam search and speculative decoding, and long work cut in slices."""
