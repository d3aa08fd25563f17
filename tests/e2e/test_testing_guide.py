"""docs/testing.md, run as written: every `test_` function in its Python blocks, against the
built site, with the guide's fixtures (`page`, `site`, `course`) given here; its course page and
script served on another origin, with the guide's example address replaced by the site's; and
its table of names checked against the page."""

import re

import pytest

from tests.e2e.conftest import ROOT, new_context, serve, wait_ready

GUIDE = (ROOT / "docs" / "testing.md").read_text()
EXAMPLE_SITE = "https://example.org/decodelab/"


def blocks(language):
    return re.findall(rf"^```{language}\n(.*?)^```", GUIDE, flags=re.M | re.S)


def guide_tests():
    """Each test function of the guide, compiled from its own block (with the block's imports)."""
    found = {}
    for source in blocks("python"):
        scope = {}
        exec(compile(source, "docs/testing.md", "exec"), scope)  # noqa: S102 - our own guide
        found.update({name: fn for name, fn in scope.items() if name.startswith("test_")})
    return found


TESTS = guide_tests()


@pytest.fixture(scope="module")
def course(site_root, tmp_path_factory, base_url):
    """The guide's course page and script, served from localhost (another origin than the site)."""
    folder = tmp_path_factory.mktemp("course")
    [html] = [b for b in blocks("html") if "<iframe" in b]
    [script] = [b for b in blocks("js") if b.startswith("// course.js")]
    assert EXAMPLE_SITE in html
    (folder / "course.html").write_text(html.replace(EXAMPLE_SITE, base_url))
    (folder / "course.js").write_text(script)
    server, url = serve(folder, host="localhost")
    yield url
    server.shutdown()


def test_the_guide_has_its_examples():
    assert len(TESTS) >= 7, sorted(TESTS)
    assert "test_the_widget_in_my_course_page" in TESTS


@pytest.mark.parametrize("name", sorted(TESTS))
def test_every_example_in_the_guide_passes(name, chromium, base_url, course):
    fn = TESTS[name]
    context = new_context(chromium, base_url)  # warm for the site's own pages (see conftest)
    try:
        page = context.pages[0] if context.pages else context.new_page()
        fixtures = {"page": page, "site": base_url, "course": course}
        fn(**{arg: fixtures[arg] for arg in fn.__code__.co_varnames[:fn.__code__.co_argcount]})
    finally:
        context.close()


def test_the_guides_names_find_one_thing_each(app):
    wait_ready(app)
    table = GUIDE.split("## Names to find things by", 1)[1]
    labels = [name.strip() for row in re.findall(r"^\| ([^|]+) \| (?:select|text|number|checkbox) \|$",
                                                  table, flags=re.M) for name in row.split(",")]
    assert len(labels) >= 13, labels
    for name in labels:
        assert app.get_by_label(name, exact=True).count() == 1, name
    buttons = re.search(r"\(`get_by_role\(\"button\".*?\): (.*?)\. The rules", table, flags=re.S)[1]
    for name in re.split(r",\s*", buttons.replace("\n", " ")):
        assert app.get_by_role("button", name=name.strip(), exact=True).count() == 1, name
    regions = ["Generated text", "Finish reason", "One step, taken apart", "Share and reproduce",
               "Check your understanding"]
    for name in regions:
        assert name in table.replace("\n", " ")
        if name == "Check your understanding":  # in a chapter of its own, opened as the guide says
            app.locator('#course-map a[href="#check"]').click()
        assert app.get_by_role("region", name=name, exact=True).count() == 1, name
    app.locator('#course-map a[href="#start"]').click()
    # the rules behind More rules, once it is open
    app.locator("#more-rules > summary").click()
    hidden = re.search(r"\*More rules\* \((.*?) and the others\)", table.replace("\n", " "))[1]
    for name in re.split(r",\s*", hidden):
        assert app.get_by_label(name.strip(), exact=True).count() == 1, name
    app.locator("#more-rules > summary").click()
