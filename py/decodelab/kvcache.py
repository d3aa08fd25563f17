"""KV-cache memory arithmetic.

A decoder caches, for every layer and every past token, one key and one value vector per KV
head. So per token it stores 2 (K and V) x layers x kv_heads x head_dim elements. For 32 layers,
8 KV heads, head dim 128 and 2-byte elements that is 2*32*8*128*2 = 131072 bytes (128 KiB) per
token: 512 MiB for 4096 tokens, 4 GiB for 8 such sequences, before weights and activations.
Grouped-query and multi-query attention shrink it by using fewer KV heads than query heads.
"""


def kv_cache_bytes(layers: int, kv_heads: int, head_dim: int, bytes_per_element: float,
                   tokens: int, sequences: int = 1) -> dict:
    per_token = 2 * layers * kv_heads * head_dim * bytes_per_element
    total = per_token * tokens * sequences
    as_int = lambda x: int(x) if float(x).is_integer() else x  # noqa: E731
    return {"bytes_per_token": as_int(per_token), "total_bytes": as_int(total)}
