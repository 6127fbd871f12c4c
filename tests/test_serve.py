"""`python -m pipeline serve`: rebuild on change in the same process, live reload, last good site on failure."""

import html
import json
import shutil
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import SOURCES, edit_csv
from pipeline.serve import TEMPLATES, EditorLoop, inject

NBSP = "\u00a0"
PAGE = "servers/esc8000a-8x-h100.html"


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode("utf-8")


def wait_for(loop: EditorLoop, condition, timeout: float = 30) -> dict:
    """Poll /__status as the page's script does, until `condition(status)` (at most `timeout` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = json.loads(fetch(loop.url + "__status"))
        if condition(status):
            return status
        time.sleep(0.1)
    pytest.fail(f"no rebuild within {timeout} s: {status}")


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    """The editors' loop on a free port over a private copy of sources/ (watched alone: tests own it)."""
    root = tmp_path_factory.mktemp("serve")
    sources = shutil.copytree(SOURCES, root / "sources")
    loop = EditorLoop(sources, root / "output", port=0, quiet=True, watch=[sources]).start()
    yield loop
    loop.stop()


def test_edit_rebuilds_and_failure_keeps_last_good_site(loop, capsys):
    sources = loop.sources
    on_disk = (loop.out / "site" / PAGE).read_text(encoding="utf-8")
    page = fetch(loop.url + PAGE)
    assert "/__status" in page and "/__status" not in on_disk
    assert page.replace(page[page.rindex("<script>/* pipeline serve") : page.rindex("</body>")], "") == on_disk
    assert f"2{NBSP}373{NBSP}300" in page
    assert wait_for(loop, lambda s: True) == {
        "generation": 1,
        "version": 1,
        "ok": True,
        "report": None,
        "building": False,
    }

    started = time.monotonic()
    edit_csv(sources / "servers.csv", ",8,pcie,2373300,", ",8,pcie,2450000,")
    wait_for(loop, lambda s: s["generation"] == 2)
    print(f"edit → rebuilt site: {time.monotonic() - started:.1f} s")
    page = fetch(loop.url + PAGE)
    assert f"2{NBSP}450{NBSP}000" in page and f"2{NBSP}373{NBSP}300" not in page
    assert "pipeline-serve-error" not in page
    assert "/__status" not in (loop.out / "site" / PAGE).read_text(encoding="utf-8")

    edit_csv(sources / "servers.csv", "h100-pcie,8,pcie,2450000", "h999,8,pcie,2450000")
    status = wait_for(loop, lambda s: s["version"] == 3)
    assert status["generation"] == 2 and status["ok"] is False
    assert 'gpu_id = "h999"' in status["report"]
    page = fetch(loop.url + PAGE)
    assert "pipeline-serve-error" in page
    assert html.escape('gpu_id = "h999"') in page
    assert f"2{NBSP}450{NBSP}000" in page  # the last good build is still served
    with pytest.raises(urllib.error.HTTPError) as missing:
        fetch(loop.url + "no-such-page.html")
    assert missing.value.code == 404 and "pipeline-serve-error" in missing.value.read().decode("utf-8")
    assert 'gpu_id = "h999"' in capsys.readouterr().err

    edit_csv(sources / "servers.csv", "h999,8,pcie,2450000", "h100-pcie,8,pcie,2450000")
    status = wait_for(loop, lambda s: s["version"] == 4)
    assert status["ok"] is True
    assert "pipeline-serve-error" not in fetch(loop.url + PAGE)


def test_assets_are_served_as_they_are(loop):
    css = next((loop.out / "site").glob("style.*.css"))
    assert fetch(loop.url + css.name) == css.read_text(encoding="utf-8")
    assert "/__status" in fetch(loop.url + "servers/")  # a folder's index.html
    with urllib.request.urlopen(urllib.request.Request(loop.url + css.name, method="HEAD"), timeout=10) as head:
        assert head.read() == b"" and int(head.headers["Content-Length"]) == css.stat().st_size


def test_banner_is_escaped():
    page = inject(b"<html><body><p>x</p></body></html>", 7, "<script>alert(1)</script> & more")
    text = page.decode("utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in text
    assert text.index("pipeline-serve-error") < text.index("var version = 7;") < text.index("</body>")
    assert "pipeline-serve-error" not in inject(b"<p>no body tag</p>", 1, None).decode("utf-8")


def test_templates_are_watched_by_default(sources, tmp_path):
    loop = EditorLoop(sources, tmp_path / "output", port=0)
    try:
        assert loop.watch == [sources, TEMPLATES]
        assert loop.url.startswith("http://127.0.0.1:")
    finally:
        loop.server.server_close()


def test_open_page_reloads_in_a_browser(loop, browser):
    """The injected script reloads an open page when a rebuild finishes (Debian's chromium)."""
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(loop.url + PAGE)
        page.evaluate("window.notReloaded = true")
        before = json.loads(fetch(loop.url + "__status"))
        started = time.monotonic()
        servers = loop.sources / "servers.csv"
        lines = servers.read_text(encoding="utf-8").splitlines(keepends=True)
        row = next(i for i, line in enumerate(lines) if line.startswith("esc8000a-8x-h100,"))
        cells = lines[row].split(",")
        cells[6] = "2600000"
        lines[row] = ",".join(cells)
        servers.write_text("".join(lines), encoding="utf-8")
        page.wait_for_function("!window.notReloaded", timeout=30_000)
        page.wait_for_load_state("load")
        elapsed = time.monotonic() - started
        assert json.loads(fetch(loop.url + "__status"))["generation"] == before["generation"] + 1
        assert f"2{NBSP}600{NBSP}000" in page.text_content("body")
        print(f"edit → page reloaded in the browser: {elapsed:.1f} s")
    finally:
        context.close()


def test_status_answers_a_long_poll_when_the_version_changes(loop):
    now = json.loads(fetch(loop.url + "__status"))
    assert json.loads(fetch(loop.url + f"__status?after={now['version'] - 1}")) == now  # differs: at once
    answers = []
    waiting = threading.Thread(target=lambda: answers.append(loop.status(after=now["version"])))
    waiting.start()
    time.sleep(0.3)
    assert answers == []  # still waiting for a rebuild
    with loop.lock:
        loop.version += 1
        loop.changed.notify_all()
    waiting.join(timeout=5)
    assert answers and answers[0]["version"] == now["version"] + 1
