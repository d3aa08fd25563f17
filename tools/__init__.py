"""The build's parts, used by build.py (the one entry point): fetching the runtime, preparing
the corpora, the per-user cache, the staleness rule, the wheels and the site."""
