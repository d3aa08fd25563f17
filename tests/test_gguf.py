"""decodelab's GGUF reader against files the `gguf` package (llama.cpp's own Python writer)
writes: every supported type dequantized exactly as the package dequantizes it, metadata of
every kind read back, and every kind of damage refused with a message that names it."""

import struct

import numpy as np
import pytest

import gguf  # noqa: E402  (a test dependency: llama.cpp's own writer and dequantizer)

from decodelab.pretrained import gguf as reader  # noqa: E402
from decodelab.pretrained.gguf import GGUF, GGUFError  # noqa: E402

Q = gguf.GGMLQuantizationType


def add_metadata(w, metadata) -> None:
    """(key, value) pairs into a gguf.GGUFWriter, each as its Python type says: text, true or
    false, a float32, a uint32, or an array (a numpy array as its list)."""
    for key, value in metadata:
        if isinstance(value, str):
            w.add_string(key, value)
        elif isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        else:
            w.add_array(key, value.tolist() if isinstance(value, np.ndarray) else value)


def close(w) -> None:
    """Write the header, the metadata and the tensors, and close the file."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write(tmp_path, tensors=(), metadata=(), name="m.gguf") -> bytes:
    """A GGUF file written by the gguf package: tensors (name, float32 array, type)."""
    path = tmp_path / name
    w = gguf.GGUFWriter(str(path), "llama")
    add_metadata(w, metadata)
    for tname, values, qtype in tensors:
        if qtype in (Q.F32, Q.F16):
            w.add_tensor(tname, values.astype(np.float32 if qtype == Q.F32 else np.float16))
        elif values.dtype == np.uint8:  # bytes as they are (a type gguf cannot quantize)
            w.add_tensor(tname, values, raw_dtype=qtype)
        else:
            w.add_tensor(tname, gguf.quantize(values, qtype), raw_dtype=qtype)
    close(w)
    return path.read_bytes()


@pytest.mark.parametrize("qtype", [Q.F32, Q.F16, Q.Q8_0, Q.Q4_0, Q.Q4_1])
def test_each_type_dequantizes_exactly_as_ggml(tmp_path, qtype):
    rng = np.random.default_rng(int(qtype))
    values = (rng.standard_normal((6, 64)) * rng.uniform(0.01, 3, (6, 1))).astype(np.float32)
    values[0, :32] = 0.0  # a block of zeros: scale 0
    data = write(tmp_path, [("w", values, qtype)])
    got = GGUF(data).array("w")
    ref = gguf.GGUFReader(tmp_path / "m.gguf").tensors[0]
    expected = gguf.dequantize(ref.data, ref.tensor_type).reshape(6, 64)
    assert got.dtype == np.float32 and got.shape == (6, 64)
    assert np.array_equal(got, expected.astype(np.float32))
    if qtype == Q.F32:
        assert np.array_equal(got, values)
    elif qtype in (Q.Q4_0, Q.Q4_1):  # 4 bits: within a block's step of the original
        assert np.abs(got - values).max() < 0.6 * np.abs(values).max()
    # written into rows of a larger array (a fused matrix) instead: the same values, nothing
    # else touched; a wrong shape or a view that is not C-contiguous is refused
    fused = np.full((10, 64), 7.0, np.float32)
    assert GGUF(data).array("w", out=fused[2:8]) is not None
    assert np.array_equal(fused[2:8], expected)
    assert (fused[:2] == 7).all() and (fused[8:] == 7).all()
    with pytest.raises(GGUFError, match="shape"):
        GGUF(data).array("w", out=fused[:5])
    with pytest.raises(ValueError, match="C-contiguous"):
        GGUF(data).array("w", out=np.zeros((64, 6), np.float32).T)


def test_q4_1_by_hand():
    """One Q4_1 block written byte by byte: value j = nibble * d + m, low nibbles first."""
    d, m = np.float16(0.5), np.float16(-1.0)
    nibbles = np.arange(32) % 16
    qs = (nibbles[:16] | (nibbles[16:] << 4)).astype(np.uint8)
    block = np.frombuffer(d.tobytes() + m.tobytes() + qs.tobytes(), np.uint8)
    assert reader.dequantize(block, "Q4_1").tolist() == [n * 0.5 - 1.0 for n in nibbles]


def test_metadata_of_every_kind_and_the_layout(tmp_path):
    data = write(tmp_path, [("a", np.ones((2, 32), np.float32), Q.F32),
                            ("b", np.arange(64, dtype=np.float32), Q.F16)],
                 [("general.name", "tiny"), ("x.count", 7), ("x.ratio", 0.25),
                  ("x.flag", True), ("x.words", ["one", "two", "三"]), ("x.ids", [3, 1, 2])])
    f = GGUF(data)
    assert f.version == 3 and f.alignment == 32 and f.data_start % 32 == 0
    assert f.metadata["general.name"] == "tiny" and f.metadata["x.count"] == 7
    assert f.metadata["x.ratio"] == 0.25 and f.metadata["x.flag"] is True
    assert f.metadata["x.words"] == ["one", "two", "三"]
    assert f.metadata["x.ids"].tolist() == [3, 1, 2]
    assert f.tensors["a"].shape == (2, 32) and f.tensors["b"].shape == (64,)
    assert np.array_equal(f.array("b"), np.arange(64, dtype=np.float32))
    assert f.bytes.base is not None  # a view of the bytes it was given, not a copy


def header(n_tensors, n_kv, version=3):
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


@pytest.mark.parametrize("data, words", [
    (b"GGML" + bytes(64), "not a GGUF file"),
    (b"GG", "ends inside the magic number"),
    (header(0, 0, version=1), "GGUF version 1"),
    (header(2**40, 0), "more than"),  # absurd counts: refused before any loop
    (header(0, 2**62), "more than"),
    (header(0, 1) + struct.pack("<Q", 2**50) + bytes(16), "ends inside metadata key 0"),  # 1 PB
    (header(0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<I", 99), "value type 99"),
    (header(0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 4, 2**60),
     "ends inside metadata k"),  # an array of 2**60 uint32
], ids=["magic", "short", "version", "tensors", "metadata", "key", "type", "array"])
def test_a_damaged_header_is_refused_by_name(tmp_path, monkeypatch, data, words):
    path = tmp_path / "damaged.gguf"
    path.write_bytes(data)
    monkeypatch.setattr(reader, "HEADER_READ", 8)  # a file's header read in several goes
    for source in (data, path):
        with pytest.raises(GGUFError, match=words):
            GGUF(source)


def test_a_truncated_file_names_the_tensor(tmp_path):
    data = write(tmp_path, [("w", np.ones((4, 64), np.float32), Q.Q8_0)])
    (tmp_path / "cut.gguf").write_bytes(data[:-40])  # more than the padding after the last tensor
    for source in (data[:-40], tmp_path / "cut.gguf"):
        with pytest.raises(GGUFError, match="tensor w needs bytes up to .*truncated"):
            GGUF(source)


def test_a_file_read_from_disk_a_tensor_at_a_time(tmp_path, monkeypatch):
    """Given a path, the reader reads the header (in several goes when it is longer than the
    first read) and then only the bytes of the tensor asked for: the same metadata and values
    as from the bytes, and never the whole file at once."""
    rng = np.random.default_rng(3)
    tensors = [(f"w{i}", rng.standard_normal((8, 64)).astype(np.float32), q)
               for i, q in enumerate((Q.Q8_0, Q.Q4_1, Q.F16, Q.F32))]
    words = [f"word{i}" for i in range(100)]  # a header of about 1.7 kB
    data = write(tmp_path, tensors, [("general.name", "disk"), ("x.words", words)])
    path = tmp_path / "m.gguf"
    reads = []
    real_read = GGUF._read

    def read(self, start, n, what):
        reads.append((start, n))
        return real_read(self, start, n, what)

    monkeypatch.setattr(reader, "HEADER_READ", 256)
    monkeypatch.setattr(GGUF, "_read", read)
    on_disk, in_memory = GGUF(path), GGUF(data)
    assert [n for _, n in reads] == [256, 1024, 4096] and 4096 < len(data)  # x4 till it fits
    assert on_disk.bytes is None and on_disk.size == len(data)
    assert on_disk.metadata["x.words"] == words and on_disk.metadata["general.name"] == "disk"
    assert on_disk.tensors.keys() == in_memory.tensors.keys()
    for name, _, _ in tensors:
        del reads[:]
        assert np.array_equal(on_disk.array(name), in_memory.array(name))
        info = on_disk.tensors[name]
        assert reads == [(on_disk.data_start + info.offset, info.nbytes)]  # that tensor alone
    path.write_bytes(data[:on_disk.data_start + on_disk.tensors["w3"].offset + 8])  # cut later
    with pytest.raises(GGUFError, match="the file ends inside tensor w3.*changed or cut"):
        on_disk.array("w3")
    path.unlink()
    with pytest.raises(GGUFError, match="could not be read"):
        on_disk.array("w0")


def test_an_unsupported_type_is_refused_by_name(tmp_path):
    data = write(tmp_path, [("w", np.zeros((2, 210), np.uint8), Q.Q6_K)])  # 2 blocks of 256
    f = GGUF(data)  # the file reads; only that tensor cannot be
    with pytest.raises(GGUFError, match="tensor w is stored as Q6_K; decodelab reads F32, F16, "
                                        "Q4_0, Q4_1, Q8_0"):
        f.array("w")


def test_a_file_over_the_limit_is_refused_before_it_is_read():
    with pytest.raises(GGUFError, match="decodelab reads GGUF files up to 1 MiB"):
        GGUF(bytes(3 * 2**20), max_bytes=2**20)


def test_a_file_on_disk_over_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from decodelab.pretrained import model

    path = tmp_path / "big.gguf"
    with open(path, "wb") as fh:
        fh.truncate(3 * 2**20)  # sparse: three megabytes that were never written

    def never(*args, **kwargs):
        raise AssertionError("the file was opened")

    monkeypatch.setattr(reader, "open", never, raising=False)  # gguf.py's open, not the test's
    with pytest.raises(GGUFError, match="the file is 3 MiB; decodelab reads GGUF files up to 1 MiB"):
        model.load(path, max_bytes=2**20)
