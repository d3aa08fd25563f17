"""Take it to transformers, in the page: the zip the Share panel downloads holds the run's model
and repeat.py, which repeats a greedy run token for token in the real library; a bigram run is
refused in words and the page keeps working."""

import subprocess
import sys
import zipfile

from tests.e2e.test_page import generate, generated_text, reset


def test_the_zip_repeats_a_greedy_run_in_transformers(app, tmp_path):
    reset(app, Model="transformer", Dataset="prose", Tokenizer="bpe", Prompt="The cache ",
          Greedy=True, Max_new_tokens=24)
    generate(app)
    text = generated_text(app)
    with app.expect_download() as download:
        app.get_by_role("button", name="Download for transformers (.zip)").click()
    assert download.value.suggested_filename == "decodelab-prose-bpe.zip"
    path = tmp_path / "run.zip"
    download.value.save_as(path)
    zipfile.ZipFile(path).extractall(tmp_path)
    status = app.locator("#share-status")
    assert "python repeat.py" in status.inner_text()
    done = subprocess.run([sys.executable, "repeat.py"], cwd=tmp_path / "decodelab-prose-bpe",
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the same tokens as decodelab" in done.stdout and "NOT" not in done.stdout
    assert repr(text.removeprefix("The cache ")) in done.stdout or text.strip() in done.stdout


def test_a_bigram_run_is_refused_in_words(app):
    reset(app, Model="bigram", Dataset="names", Seed=3)
    generate(app)
    app.get_by_role("button", name="Download for transformers (.zip)").click()
    status = app.locator("#share-status")
    status.filter(has_text="Only a transformer").wait_for()
    assert app.get_by_role("button", name="Download for transformers (.zip)").is_enabled()
    assert generate(app)["status"] == "done"  # the page goes on
