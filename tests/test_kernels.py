"""decodelab's C kernels (py/decodelab/core/kernels): the native build, the WebAssembly build
run in Pyodide, and the numpy arithmetic give the same bits on the same inputs; and what they
compute is the product it claims to be (held to float64 sums of the same quantized values, and
of the unquantized ones within what 8-bit activations cost)."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from decodelab.core.kernels import arithmetic, library
from decodelab.core.kernels.source import native_name, source_digest
from tests.kernels import cases

ROOT = Path(__file__).resolve().parents[1]
WASM = ROOT / "artifacts" / "kernels" / f"decodelab_kernels-{source_digest()}.wasm.so"


@pytest.fixture(scope="module")
def given():
    return cases.inputs()


@pytest.fixture(scope="module")
def in_numpy(given):
    return cases.outputs(library.InNumpy("(a test)"), given)


@pytest.fixture(scope="module")
def native(given):
    path = library.BUILT / native_name()
    assert path.exists(), f"{path} is missing: `python3 build.py artifacts` builds it"
    k = library.Compiled(path)
    assert library.kernels(reload=True).compiled  # the package opens it by itself, too
    return cases.outputs(k, given)


def test_the_native_build_gives_numpys_bits(in_numpy, native):
    assert in_numpy.keys() == native.keys()
    for name in in_numpy:
        assert np.array_equal(cases.bits(native[name]), cases.bits(in_numpy[name])), name


def test_the_webassembly_build_in_pyodide_gives_the_native_bits(native, given, tmp_path):
    assert WASM.exists(), f"{WASM} is missing: `python3 build.py artifacts` builds it"
    wheels = sorted((ROOT / "static" / "pyodide").glob("numpy-*.whl"))
    assert wheels, "the site's numpy wheel is missing: `python3 build.py build` puts it there"
    np.savez(tmp_path / "in.npz", **given)
    shutil.copy(Path(cases.__file__), tmp_path / "cases.py")
    script = tmp_path / "run.py"
    script.write_text(
        "import sys; sys.path.insert(0, '/work')\n"
        "import numpy as np, cases\n"
        "from decodelab.core.kernels import kernels\n"
        "k = kernels()\n"
        "assert k.compiled, k.sentence\n"
        "np.savez('/work/out.npz', **cases.outputs(k, dict(np.load('/work/in.npz'))))\n")
    done = subprocess.run(["node", str(ROOT / "tests/kernels/in_pyodide.mjs"), str(wheels[-1]),
                           str(WASM), str(tmp_path), str(script)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = dict(np.load(tmp_path / "out.npz"))
    assert got.keys() == native.keys()
    for name in native:
        assert np.array_equal(cases.bits(got[name]), cases.bits(native[name])), name


def test_halves_are_float16s_nearest_ties_to_even(in_numpy, given):
    x = given["half"]
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    assert np.array_equal(cases.bits(in_numpy["half"]), cases.bits(want))
    r = arithmetic.half_round(np.array([1.0004883, 1.0014648, 65519.99, 65520], np.float32))
    assert r.tolist() == [1.0, 1.001953125, 65504.0, np.inf]  # ties to even; float16's edge


def test_activations_quantize_as_ggml_reference_does(in_numpy, given):
    x = given["x"]
    q, d, s = in_numpy["q"].reshape(5, 18, 32), in_numpy["d"], in_numpy["s"]
    assert np.all(q[0, 0] == 0) and d[0, 0] == 0 and s[0, 0] == 0  # a zero block
    # the tie block: amax 127 makes d = 1 exactly, so x.5 rounds away from zero
    assert d[1, 0] == 1.0
    assert q[1, 0, 1:5].tolist() == [-15, -14, -13, -12]  # -14.5 -> -15, ... -11.5 -> -12
    assert q[1, 0, -3:].tolist() == [14, 15, 16]  # 13.5 -> 14, 14.5 -> 15, 15.5 -> 16
    # every other block: d = amax / 127 as a float16, q = x / d rounded, |q| <= 127
    blocks = x.reshape(5, 18, 32).astype(np.float64)
    amax = np.abs(blocks).max(-1)
    assert np.allclose(d, amax / 127, rtol=1e-3)
    assert np.abs(q).max() == 127
    nz = amax > 0
    err = np.abs(q * (amax / 127)[..., None] - blocks)[nz]
    assert err.max() <= (amax / 127)[nz].max() * 0.5 + 1e-6
    assert np.allclose(s, q.sum(-1) * amax / 127, rtol=1e-3, atol=1e-6)


def test_the_products_are_the_dot_products_they_claim(in_numpy, given):
    x64 = given["x"].astype(np.float64)
    q = in_numpy["q"].reshape(5, 18, 32).astype(np.float64)
    d, s = in_numpy["d"].astype(np.float64), in_numpy["s"].astype(np.float64)
    packed = given["w_q4"].astype(np.int64)
    values = np.concatenate([packed & 15, packed >> 4], -1).astype(np.float64)  # (r, 18, 32)
    wd, wm = given["w_d"].astype(np.float64), given["w_m"].astype(np.float64)
    # the same quantized quantities summed in float64: float32's sums are all that differ
    exact = (np.einsum("rbj,tbj->trb", values, q) * wd[None] * d[:, None]
             + wm[None] * s[:, None]).sum(-1)
    assert np.allclose(in_numpy["q4_1"], exact, rtol=1e-5, atol=1e-5 * np.abs(exact).max())
    # against the unquantized product: within what 8-bit activations cost (about 0.5%)
    w64 = (values * wd[..., None] + wm[..., None]).reshape(72, 576)
    true = x64 @ w64.T
    assert np.abs(in_numpy["q4_1"] - true).max() < 0.02 * np.abs(true).max()
    w8 = given["w_q8"].reshape(72, 18, 32).astype(np.float64)
    q0, d0 = in_numpy["q0"].reshape(5, 18, 32).astype(np.float64), in_numpy["d0"].astype(np.float64)
    exact8 = (np.einsum("rbj,tbj->trb", w8, q0) * wd[None] * d0[:, None]).sum(-1)
    assert np.allclose(in_numpy["q8_0"], exact8, rtol=1e-5, atol=1e-5 * np.abs(exact8).max())
    true32 = x64 @ given["w_f32"].astype(np.float64).T
    assert np.allclose(in_numpy["f32"], true32, rtol=0, atol=1e-5 * np.abs(true32).max())
    assert np.array_equal(in_numpy["f32_one"], in_numpy["f32"][3:4])  # one row, as in many
    assert np.array_equal(in_numpy["q4_1_one"], in_numpy["q4_1"][2:3])


def test_attentions_sums_are_what_they_claim_and_ignore_hidden_keys(in_numpy, given):
    q, keys, w = (given[n].astype(np.float64) for n in ("q", "keys", "weights"))
    scores = np.einsum("hrd,hsd->hrs", q, keys[:, :13])
    assert np.allclose(in_numpy["scores"], scores, rtol=0, atol=1e-5 * np.abs(scores).max())
    assert np.allclose(in_numpy["row_sums"], w.reshape(15, 13).sum(-1), rtol=1e-6)
    values = np.einsum("hrs,hsd->hrd", w, keys[:, :13])
    assert np.allclose(in_numpy["values"], values, rtol=0, atol=1e-5 * np.abs(values).max())
    assert np.allclose(in_numpy["sumsq"], (given["x"].astype(np.float64) ** 2).sum(-1), rtol=1e-5)
    # keys a query may not see weigh exactly 0: the sums are the same bits with them or not
    k = library.Compiled(library.BUILT / native_name())
    wider = np.concatenate([given["weights"], np.zeros((3, 5, 7), np.float32)], axis=-1)
    assert np.array_equal(k.attn_values(wider, given["keys"], 20 * 64), in_numpy["values"])
    assert np.array_equal(k.row_sums(wider.reshape(15, 20)), in_numpy["row_sums"])
    leading = np.concatenate([np.zeros((15, 4), np.float32), wider.reshape(15, 20)], axis=-1)
    assert np.array_equal(k.row_sums(leading), in_numpy["row_sums"])  # (left padding too)


def test_without_a_build_the_package_says_so_and_runs_numpy(monkeypatch, tmp_path):
    monkeypatch.setattr(library, "BUILT", tmp_path)  # nothing built here
    monkeypatch.delenv(library.ENV, raising=False)
    k = library.kernels(reload=True)
    try:
        assert not k.compiled
        assert k.sentence == ("decodelab's C kernels are not built here, so the quantized "
                              "products run in numpy: the same numbers, many times slower.")
        broken = tmp_path / native_name()
        broken.write_bytes(b"not a library")
        k = library.kernels(reload=True)
        assert not k.compiled and "did not open" in k.sentence
    finally:
        monkeypatch.undo()
        library.kernels(reload=True)


def test_weights_go_eight_rows_side_by_side_and_back():
    rng = np.random.default_rng(1)
    blocks = rng.integers(0, 256, (16, 3, 16), dtype=np.uint8)
    scales = rng.random((16, 3)).astype(np.float32)
    grouped = arithmetic.interleave(blocks)
    assert grouped.shape == (2, 3, 16, 8)
    assert grouped[1, 2, 5, 3] == blocks[8 + 3, 2, 5]  # row 8g + r, block b, byte j
    assert np.array_equal(arithmetic.rows_of(grouped), blocks)
    assert np.array_equal(arithmetic.rows_of(arithmetic.interleave(scales)), scales)
    with pytest.raises(ValueError, match="12 rows: the kernels take weights 8 rows at a time"):
        arithmetic.interleave(blocks[:12])


@pytest.fixture(scope="module")
def smollm2_file():
    from decodelab.pretrained import files
    from decodelab.pretrained.gguf import GGUF

    try:
        return GGUF(files.find_smollm2())
    except FileNotFoundError as e:
        pytest.fail(str(e))


@pytest.mark.parametrize("name", ["blk.3.ffn_down.weight", "blk.0.attn_k.weight",
                                  "token_embd.weight"])
def test_a_files_quantized_matrix_multiplies_and_looks_up_as_its_values(smollm2_file, name):
    from decodelab.core.kernels.matrices import QuantizedMatrix

    info = smollm2_file.tensor_info(name)
    rows, k = info.shape
    w = QuantizedMatrix(info.type, smollm2_file.raw(name), rows, k)
    values = smollm2_file.array(name)  # (rows, k) float32, ggml's dequantization
    assert w.shape == (k, rows) and w.nbytes < values.nbytes / 3.5  # the file's size, not 4x
    ids = np.array([[0, 7, rows - 1], [9, 8, 15]])
    assert np.array_equal(w.rows(ids), values[ids])  # a lookup is ggml's get_rows, exactly
    x = np.random.default_rng(2).standard_normal((2, 3, k)).astype(np.float32)
    got = w.times(x)
    assert got.shape == (2, 3, rows)
    true = x.astype(np.float64) @ values.T.astype(np.float64)
    err = np.abs(got - true).max() / np.abs(true).max()
    assert err < 0.02, err  # 8-bit activations' cost (about 0.5%) ...
    assert err > 1e-5  # ... which is there: these are quantized products, not float32 ones
    one = w.times(x[1, 2])
    assert np.array_equal(one, got[1, 2])  # a decode step's row, as in a prefill's


def test_the_engines_element_wise_maths_is_float32s_within_a_step(given):
    """kernels.portable: exp, SwiGLU and the rotary tables through float64, rounded once, so
    the page's WebAssembly and a native build agree: exp and SwiGLU are numpy's float32 ones
    within a float32 step, the tables as close to float64's as numpy's float32 ones are
    (tests/e2e/test_pretrained_page.py holds the page's runs to the CLI's)."""
    from decodelab.core.kernels import portable
    from decodelab.core.models.layers import Config, rope_tables, swiglu_forward

    rng = np.random.default_rng(3)
    x = rng.normal(0, 4, size=(5, 64)).astype(np.float32)
    wide = np.exp(x.astype(np.float64))
    assert np.array_equal(portable.exp(x), wide.astype(np.float32))
    out = np.empty_like(x)
    assert portable.exp(x, out=out) is out and np.array_equal(out, wide.astype(np.float32))
    np.testing.assert_allclose(portable.swiglu(x), swiglu_forward(x), rtol=3e-7, atol=1e-30)
    smollm2 = Config(vocab_size=49152, context_size=2048, n_layer=30, n_embd=576, n_head=9,
                     n_kv_head=3, mlp_hidden=1536, rope_theta=100000.0)  # (its shape)
    cos, sin = portable.rope_tables(smollm2, 512)
    ref_cos, ref_sin = rope_tables(smollm2, np.float32, 512)
    assert cos.dtype == np.float32 and cos.shape == ref_cos.shape == (512, 64)
    # each angle is a float32 product, as in the reference, so both tables err about alike
    # against float64's; the portable one's frequencies are float64's, rounded once
    pos, i = np.arange(512)[:, None], np.arange(0, 64, 2)[None, :]
    exact = np.tile(np.cos(pos * 100000.0 ** (-i / 64)), 2)
    assert np.abs(cos - exact).max() <= np.abs(ref_cos - exact).max() + 1e-7
    np.testing.assert_allclose(cos, ref_cos, atol=1e-4)
    np.testing.assert_allclose(sin, ref_sin, atol=1e-4)
