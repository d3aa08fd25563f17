"""The rules of a run: the settings, every decoding rule (sampling), the stop rules, the shown
text, token healing, and JSON mode's grammar and shape."""
