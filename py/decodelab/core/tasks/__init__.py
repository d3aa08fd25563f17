"""The tasks model's world: its data (arithmetic and record questions), the calculator it calls,
the tool-call protocol of a run, and asking it a question."""
