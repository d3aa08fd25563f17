"""Serving many requests from one pool: the cache in blocks (paged), a prefix tree of full
blocks, and the scheduler's continuous batching."""
