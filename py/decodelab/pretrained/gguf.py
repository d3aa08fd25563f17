"""Reading a GGUF file (llama.cpp's model format) with numpy alone: the header, the metadata,
the tensor table, and each tensor's values as float32.

The layout (ggml's specification of GGUF), little-endian throughout:
    b"GGUF", u32 version (2 or 3), u64 tensor count, u64 metadata count,
    metadata: key (u64 length + UTF-8), u32 value type, value,
    tensor infos: name, u32 n_dims, u64 dims[n_dims], u32 type, u64 offset,
    padding to `general.alignment` (32 unless the metadata says otherwise), then the data.
dims[0] is the fastest-varying axis, so numpy's shape is the dims reversed: a weight stored as
dims [in, out] is a numpy (out, in) array, one output's weights per row.

Quantized types store blocks of 32 values (ggml's formulas, in float32 as ggml computes them):
    Q8_0: f16 d, 32 int8 q                    x = q * d
    Q4_0: f16 d, 16 bytes of nibbles          x = (nibble - 8) * d
    Q4_1: f16 d, f16 m, 16 bytes of nibbles   x = nibble * d + m
A block's first 16 values are the low nibbles of its 16 bytes, the next 16 the high nibbles.

The reader takes bytes already in memory (every array a numpy view of them until a tensor is
asked for, so they are never copied) or a file's path: then it reads the header alone, and each
tensor's bytes when that tensor is asked for, so the whole file is never in memory at once (in
the browser, 98 MB less WebAssembly memory while the model is read). Every count and length is
checked against the file's size before anything is allocated from it, so a damaged or hostile
header gives a GGUFError, not a huge allocation.
"""

import os
import struct

import numpy as np

from decodelab.core.models.kvcache import blocks_for
from decodelab.pretrained.limits import BLOCKS, MAX_FILE_BYTES

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # v1 had 32-bit counts; v3 only added big-endian files, which are refused
DEFAULT_ALIGNMENT = 32
HEADER_READ = 4 * 2**20  # bytes of a file first read for its header (SmolLM2's takes 1.6 MB);
# a longer header is read again with four times as many

# metadata value types: id -> (name, struct format or None for string/array)
VALUE_TYPES = {0: ("uint8", "<B"), 1: ("int8", "<b"), 2: ("uint16", "<H"), 3: ("int16", "<h"),
               4: ("uint32", "<I"), 5: ("int32", "<i"), 6: ("float32", "<f"), 7: ("bool", "<?"),
               8: ("string", None), 9: ("array", None), 10: ("uint64", "<Q"),
               11: ("int64", "<q"), 12: ("float64", "<d")}
# numpy dtypes of arrays of scalars (read as one view, not element by element)
ARRAY_DTYPES = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1",
                10: "<u8", 11: "<i8", 12: "<f8"}

# ggml's tensor types, by id (the ones decodelab reads: limits.BLOCKS)
GGML_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
              9: "Q8_1", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K",
              16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S",
              22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64",
              29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4"}
MAX_DIMS = 4


class GGUFError(ValueError):
    """A file decodelab cannot read as GGUF, with what is wrong and where."""


class _Short(Exception):
    """The header goes on past the bytes read of it so far: read more of the file."""


class _Cursor:
    """Reads little-endian values from the first bytes of a file of `size` bytes (all of them
    when size is None), checking each read fits the file."""

    def __init__(self, buf, size=None):
        self.buf, self.at = buf, 0
        self.have, self.size = len(buf), len(buf) if size is None else size

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.at + n > self.size:
            raise GGUFError(f"the file ends inside {what}: it needs {n:,} bytes at byte "
                            f"{self.at:,}, and the file has {self.size:,} (truncated?)")
        if self.at + n > self.have:
            raise _Short()

    def unpack(self, fmt: str, what: str):
        n = struct.calcsize(fmt)
        self.need(n, what)
        value = struct.unpack_from(fmt, self.buf, self.at)[0]
        self.at += n
        return value

    def string(self, what: str) -> str:
        n = self.unpack("<Q", what)
        self.need(n, what)
        raw = bytes(self.buf[self.at:self.at + n])
        self.at += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            at = self.at - n + exc.start
            raise GGUFError(f"{what} is not UTF-8 text (byte {at:,})") from None

    def value(self, kind: int, what: str):
        if kind not in VALUE_TYPES:
            raise GGUFError(f"{what} has value type {kind}; GGUF's types are 0-12")
        fmt = VALUE_TYPES[kind][1]
        if fmt:
            return self.unpack(fmt, what)
        if kind == 8:
            return self.string(what)
        item = self.unpack("<I", what)
        count = self.unpack("<Q", what)
        if item in ARRAY_DTYPES:
            dtype = np.dtype(ARRAY_DTYPES[item])
            self.need(count * dtype.itemsize, what)
            out = np.frombuffer(self.buf, dtype, count, self.at)
            self.at += count * dtype.itemsize
            return out.astype(bool) if item == 7 else out
        if item == 8:
            self.need(count * 8, what)  # every string takes at least its 8-byte length
            return [self.string(what) for _ in range(count)]
        raise GGUFError(f"{what} is an array of type {item}; decodelab reads arrays of numbers "
                        "and strings")


class TensorInfo:
    __slots__ = ("name", "shape", "type", "offset", "nbytes")

    def __init__(self, name, shape, type_name, offset, nbytes):
        self.name, self.shape, self.type, self.offset, self.nbytes = (
            name, shape, type_name, offset, nbytes)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


class GGUF:
    """A parsed GGUF file: `metadata` (key -> value; arrays of numbers are numpy views),
    `tensors` (name -> TensorInfo, shapes in numpy's order), and `array(name)`, a tensor's
    values as float32."""

    def __init__(self, data, max_bytes: int = MAX_FILE_BYTES):
        """data: the file's bytes, or its path (read a tensor at a time, its size checked
        before a byte of it is read)."""
        self.path = os.fspath(data) if isinstance(data, (str, os.PathLike)) else None
        if self.path is None:
            buf = memoryview(data).cast("B") if not isinstance(data, np.ndarray) else data
            self.bytes = np.frombuffer(buf, np.uint8)  # a view: the file's bytes, not a copy
            self.size = len(buf)
        else:
            self.bytes, self.size = None, os.path.getsize(self.path)
        if self.size > max_bytes:
            raise GGUFError(f"the file is {self.size / 2**20:.0f} MiB; decodelab reads GGUF "
                            f"files up to {max_bytes / 2**20:.0f} MiB (their float32 weights "
                            "must fit in memory)")
        if self.path is None:
            self._parse(_Cursor(buf))
            return
        want = min(self.size, HEADER_READ)
        while True:  # the header's length is known only once it is read
            try:
                self._parse(_Cursor(self._read(0, want, "the header"), self.size))
                return
            except _Short:
                want = min(self.size, want * 4)

    def _read(self, start: int, n: int, what: str) -> memoryview:
        """n bytes of the file from `start`, read from disk."""
        out = np.empty(n, np.uint8)
        try:
            with open(self.path, "rb") as fh:
                fh.seek(start)
                got = fh.readinto(out)
        except OSError as e:
            raise GGUFError(f"the file could not be read ({e.strerror or e})") from None
        if got != n:
            raise GGUFError(f"the file ends inside {what}: it needs bytes up to "
                            f"{start + n:,}, and has {start + got:,} now (changed or cut?)")
        return memoryview(out)

    def _parse(self, c: _Cursor) -> None:
        buf = c.buf
        c.need(4, "the magic number")
        if bytes(buf[:4]) != MAGIC:
            raise GGUFError(f"not a GGUF file: it starts with {bytes(buf[:4])!r}, not {MAGIC!r}")
        c.at = 4
        self.version = c.unpack("<I", "the version")
        if self.version not in VERSIONS:
            swapped = struct.unpack_from(">I", buf, 4)[0]
            if swapped in VERSIONS:  # (GGUF 3 allows either byte order; the file says which
                # only by its numbers)
                raise GGUFError(f"a big-endian GGUF file (version {swapped}, its numbers stored "
                                "most significant byte first); decodelab reads little-endian "
                                "files, as llama.cpp writes them")
            raise GGUFError(f"GGUF version {self.version}; decodelab reads versions "
                            f"{', '.join(map(str, VERSIONS))}")
        n_tensors = c.unpack("<Q", "the tensor count")
        n_kv = c.unpack("<Q", "the metadata count")
        # the smallest metadata entry is 13 bytes (an empty key, a type, a byte), the smallest
        # tensor info 24: counts beyond what the file can hold are refused before any loop
        if n_kv * 13 > c.size - c.at or n_tensors * 24 > c.size - c.at:
            raise GGUFError(f"the header claims {n_kv:,} metadata entries and {n_tensors:,} "
                            f"tensors, more than {c.size:,} bytes can hold")
        self.metadata = {}
        for i in range(n_kv):
            key = c.string(f"metadata key {i}")
            if key in self.metadata:  # (which one would count? gguf-py refuses it too)
                raise GGUFError(f"the metadata key {key} appears twice")
            kind = c.unpack("<I", f"the type of {key}")
            self.metadata[key] = c.value(kind, f"metadata {key}")
        self.alignment = self.integer("general.alignment", DEFAULT_ALIGNMENT, least=1)
        if self.alignment & (self.alignment - 1):
            raise GGUFError(f"general.alignment is {self.alignment}; it must be a power of two")
        infos, names = [], set()
        for i in range(n_tensors):
            name = c.string(f"the name of tensor {i}")
            if name in names:
                raise GGUFError(f"the tensor name {name} appears twice")
            names.add(name)
            n_dims = c.unpack("<I", f"the dimensions of {name}")
            if not 1 <= n_dims <= MAX_DIMS:
                raise GGUFError(f"tensor {name} has {n_dims} dimensions; GGUF allows 1 to "
                                f"{MAX_DIMS}")
            dims = [c.unpack("<Q", f"the shape of {name}") for _ in range(n_dims)]
            type_id = c.unpack("<I", f"the type of {name}")
            offset = c.unpack("<Q", f"the offset of {name}")
            infos.append((name, tuple(reversed(dims)), type_id, offset))
        self.data_start = blocks_for(c.at, self.alignment) * self.alignment  # aligned up
        self.tensors = {}
        for name, shape, type_id, offset in infos:
            self.tensors[name] = self._info(name, shape, type_id, offset)

    def _info(self, name, shape, type_id, offset) -> TensorInfo:
        type_name = GGML_TYPES.get(type_id, f"type {type_id}")
        count = 1
        for d in shape:
            count *= d
        nbytes = None
        if type_name in BLOCKS:
            per_block, block_bytes = BLOCKS[type_name]
            if shape[-1] % per_block:
                raise GGUFError(f"tensor {name} ({type_name}) has rows of {shape[-1]} values, "
                                f"not a multiple of its blocks of {per_block}")
            nbytes = count // per_block * block_bytes
            end = self.data_start + offset + nbytes
            if offset % self.alignment:
                raise GGUFError(f"tensor {name} starts at offset {offset:,}, not a multiple of "
                                f"the alignment {self.alignment}")
            if end > self.size:
                raise GGUFError(f"tensor {name} needs bytes up to {end:,}; the file has "
                                f"{self.size:,} (truncated?)")
        return TensorInfo(name, shape, type_name, offset, nbytes)

    def get(self, key: str, default=None):
        return self.metadata.get(key, default)

    def require(self, key: str):
        if key not in self.metadata:
            raise GGUFError(f"the file's metadata has no {key}")
        return self.metadata[key]

    def integer(self, key: str, default=None, least: int = 0) -> int:
        """A metadata value that must be a whole number of at least `least` (a string, a
        fraction, true/false or a list is refused by name); `default` when the key is absent
        (required when None)."""
        if key not in self.metadata and default is not None:
            return default
        value = self.require(key)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise GGUFError(f"metadata {key} is {described(value)}; it must be a whole number")
        if value < least:
            raise GGUFError(f"metadata {key} is {value}; it must be at least {least}")
        return int(value)

    def number(self, key: str, default: float) -> float:
        """A metadata value that must be a finite number above 0; `default` when absent."""
        if key not in self.metadata:
            return default
        value = self.metadata[key]
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer,
                                                              np.floating)):
            raise GGUFError(f"metadata {key} is {described(value)}; it must be a number")
        if not np.isfinite(value) or value <= 0:
            raise GGUFError(f"metadata {key} is {value}; it must be a number above 0")
        return float(value)

    def raw(self, name: str) -> np.ndarray:
        """A tensor's stored bytes (a view of the bytes given, or read from the file)."""
        info = self.tensor_info(name)
        start = self.data_start + info.offset
        if self.path is not None:
            return np.frombuffer(self._read(start, info.nbytes, f"tensor {name}"), np.uint8)
        return self.bytes[start:start + info.nbytes]

    def tensor_info(self, name: str) -> TensorInfo:
        if name not in self.tensors:
            raise GGUFError(f"the file has no tensor {name}")
        info = self.tensors[name]
        if info.nbytes is None:
            raise GGUFError(f"tensor {name} is stored as {info.type}; decodelab reads "
                            f"{', '.join(BLOCKS)}")
        return info

    def array(self, name: str, out=None) -> np.ndarray:
        """The tensor's values as a float32 array of its (numpy-order) shape; written into
        `out` when given (a C-contiguous float32 array of that shape: rows of a fused matrix)."""
        info = self.tensor_info(name)
        if out is None:
            return dequantize(self.raw(name), info.type).reshape(info.shape)
        if out.shape != tuple(info.shape):
            raise GGUFError(f"tensor {name} has shape {tuple(info.shape)}; the metadata "
                            f"implies {out.shape}")
        if out.dtype != np.float32 or not out.flags.c_contiguous:
            raise ValueError("out must be a C-contiguous float32 array")
        dequantize(self.raw(name), info.type, out.reshape(-1))
        return out


def described(value) -> str:
    """A metadata value's kind, for a message: "text ('abc')", "a list of 3", "true"."""
    if isinstance(value, str):
        return f"text ({value[:40]!r})"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, np.ndarray)):
        return f"a list of {len(value)}"
    return f"the number {value}"


def dequantize(raw: np.ndarray, type_name: str, out=None) -> np.ndarray:
    """Stored bytes (uint8) of `type_name` -> float32 values (flat), by ggml's formulas, in a
    new array or written into `out` (flat float32). The result is the only array of the
    tensor's size that is allocated, and never a view of `raw`, so a model read from bytes in
    memory does not keep them alive."""
    n = raw.size * BLOCKS[type_name][0] // BLOCKS[type_name][1]  # values stored
    out = np.empty(n, np.float32) if out is None else out
    if type_name == "F32":
        out[:] = raw.view("<f4")
        return out
    if type_name == "F16":
        out[:] = raw.view("<f2")
        return out
    per_block, block_bytes = BLOCKS[type_name]
    blocks = raw.reshape(-1, block_bytes)  # (nb, bytes)
    d = blocks[:, :2].view("<f2").astype(np.float32)  # (nb, 1) the scale
    flat, out = out, out.reshape(len(blocks), per_block)  # (nb, 32), a view of out
    if type_name == "Q8_0":
        out[:] = blocks[:, 2:].view(np.int8)
        out *= d
        return flat
    qs = blocks[:, 4:] if type_name == "Q4_1" else blocks[:, 2:]  # (nb, 16) two nibbles each
    out[:, :16] = qs & 15
    out[:, 16:] = qs >> 4
    if type_name == "Q4_0":
        out -= 8
        out *= d
    else:
        out *= d
        out += blocks[:, 2:4].view("<f2").astype(np.float32)  # m, the offset
    return flat
