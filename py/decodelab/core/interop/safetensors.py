"""The safetensors file format, read and written with numpy alone (so the page can write one too).

A file is: 8 bytes, the header's length N as a little-endian unsigned 64-bit integer; N bytes of
JSON, {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, padded
with spaces so the data starts at a multiple of 8; then every tensor's bytes, row-major and
little-endian, at its offsets counted from the end of the header. Nothing else: no code runs
when a file is read, which is why transformers prefers it to pickles.
"""

import json
import struct

import numpy as np

from decodelab.errors import FieldError

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "U8": "u1",
          "BOOL": "?"}  # safetensors' names; BF16 has no numpy dtype (read_safetensors refuses it)
NAMES = {np.dtype(v): k for k, v in DTYPES.items()}


def to_bytes(tensors: dict, metadata: dict | None = None) -> bytes:
    """The file's bytes for {name: array}; tensors are written in name order."""
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        a = a.astype(a.dtype.newbyteorder("<")) if a.dtype.byteorder == ">" else a
        if a.dtype not in NAMES:
            raise ValueError(f"{name}: dtype {a.dtype} has no safetensors name")
        data = a.tobytes()
        header[name] = {"dtype": NAMES[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)  # the data starts 8-aligned
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def from_bytes(data: bytes, what: str = "model.safetensors") -> tuple[dict, dict]:
    """({name: array}, metadata) from a file's bytes; a clear FieldError for anything else."""
    bad = lambda why: FieldError("checkpoint", f"{what} is not a safetensors file: {why}")  # noqa
    if len(data) < 8:
        raise bad("shorter than its 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise bad(f"its header says {n} bytes, the file has {len(data) - 8} after the length")
    try:
        header = json.loads(data[8:8 + n])
    except ValueError as exc:
        raise bad(f"its header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise bad("its header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    body, tensors = memoryview(data)[8 + n:], {}
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise bad(f"tensor {name!r} lacks dtype, shape or data_offsets") from None
        if dtype not in DTYPES:
            raise FieldError("checkpoint", f"{what}: tensor {name!r} is {dtype}; decodelab reads "
                                           f"{', '.join(DTYPES)} (save the model in float32)")
        count = int(np.prod(shape)) if shape else 1
        if not 0 <= begin <= end <= len(body) or end - begin != count * np.dtype(DTYPES[dtype]).itemsize:
            raise bad(f"tensor {name!r}'s offsets do not match its shape and dtype")
        tensors[name] = np.frombuffer(body[begin:end], DTYPES[dtype]).reshape(shape).copy()
    return tensors, metadata
