"""Publishing keeps what the previous release's pages load (hashed styles, the search index, data files)
for one more release and at least KEEP_SECONDS, so that a page a CDN still serves from its cache never
misses an asset; pages themselves go at once. On small inline sites, against moto's S3 server."""

import hashlib
import json

from test_tools import objects, s3_server  # noqa: F401 (the fixture)

from pipeline.tools import publish_s3
from pipeline.tools.publish_s3 import KEEP_SECONDS, Plan, retain


def test_retain_keeps_assets_for_one_release_and_the_declared_time():
    local = {"index.html": "i2", "style.bbbbbbbbbb.css": "b"}
    todo = Plan(
        upload=["style.bbbbbbbbbb.css", "index.html", "manifest.json"],
        delete=["old.html", "style.aaaaaaaaaa.css"],
        purge=["index.html", "old.html", "style.aaaaaaaaaa.css"],
    )
    kept = retain(todo, local, {}, now=1000.0)
    assert kept == {"style.aaaaaaaaaa.css": {"since": 1000.0}}
    assert (todo.delete, todo.kept, todo.purge) == (["old.html"], ["style.aaaaaaaaaa.css"], ["index.html", "old.html"])

    # The next release, too soon: still kept; once KEEP_SECONDS have passed: deleted and purged.
    again = Plan(upload=["manifest.json"])
    assert retain(again, local, kept, now=1000.0 + KEEP_SECONDS - 1) == kept
    assert again.delete == [] and again.kept == ["style.aaaaaaaaaa.css"]
    later = Plan(upload=["manifest.json"])
    assert retain(later, local, kept, now=1000.0 + KEEP_SECONDS) == {}
    assert (later.delete, later.kept, later.purge) == (["style.aaaaaaaaaa.css"], [], ["style.aaaaaaaaaa.css"])

    # A kept file that comes back in a release is the release's again, not kept.
    back = Plan(upload=["manifest.json"])
    assert retain(back, {**local, "style.aaaaaaaaaa.css": "a"}, kept, now=1000.0 + KEEP_SECONDS) == {}
    assert back.delete == [] and back.kept == []


def write_site(out, files: dict[str, bytes]) -> None:
    site = out / "site"
    if site.exists():
        for path in sorted(site.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
    for name, content in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(content)
    manifest = {name: hashlib.sha256(content).hexdigest() for name, content in files.items()}
    (site / "manifest.json").write_text(json.dumps({"files": manifest}))


def release(n: str) -> dict[str, bytes]:
    css, index = f"style.{n * 10}.css", f"pagefind/index/ru_{n * 6}.pf_index"
    page = f'<link rel="stylesheet" href="{css}"><script src="search.js" data-index="{index}"></script>'
    return {"index.html": page.encode(), css: b"body{}" + n.encode(), index: n.encode(), "search.js": b"//"}


def referenced(page: bytes) -> list[str]:
    text = page.decode()
    return [part.split('"')[0] for part in text.split('href="')[1:] + text.split('data-index="')[1:]]


def test_two_releases_then_a_cached_page_of_the_first_still_finds_its_assets(tmp_path, s3_server, monkeypatch, capsys):  # noqa: F811
    endpoint, s3 = s3_server
    out = tmp_path / "output"
    # Its own prefix: moto's servers in one test process share their buckets.
    args = ["publish", "--to", "s3://site/retention/", "--out", str(out), "--endpoint-url", endpoint]
    args += ["--base-url", "https://example.org/gpu/"]
    clock = [1_000_000.0]
    monkeypatch.setattr(publish_s3.time, "time", lambda: clock[0])
    from pipeline.__main__ import main

    first = release("a")
    write_site(out, first)
    assert main(args) == 0
    write_site(out, release("b"))
    clock[0] += 3600
    assert main(args) == 0
    report = capsys.readouterr().out.splitlines()
    assert report[-7:] == [
        "published: 3 uploaded, 0 deleted; 2 URL(s) to purge:",
        "https://example.org/gpu/index.html",
        "https://example.org/gpu/",
        "kept, not purged: 2 file(s) of an earlier release that cached pages may still load;",
        "deleted by the first publish at least one release and 7 days after they left the site:",
        "  pagefind/index/ru_aaaaaa.pf_index",
        "  style.aaaaaaaaaa.css",
    ]
    # The first release's page, as a CDN may still serve it: everything it loads is there, unchanged.
    stored = objects(s3, "retention/")
    assert {name: stored[name] for name in referenced(first["index.html"])} == {
        name: first[name] for name in referenced(first["index.html"])
    }
    assert json.loads(stored["manifest.retained.json"]) == {
        "kept": {
            "pagefind/index/ru_aaaaaa.pf_index": {"since": 1_003_600.0},
            "style.aaaaaaaaaa.css": {"since": 1_003_600.0},
        }
    }

    # A third release a week later: the first's assets go (and are purged); the second's are kept.
    write_site(out, release("c"))
    clock[0] += KEEP_SECONDS
    assert main(args) == 0
    stored = objects(s3, "retention/")
    assert sorted(stored) == sorted(
        [
            *release("c"),
            *["style.bbbbbbbbbb.css", "pagefind/index/ru_bbbbbb.pf_index"],
            "manifest.json",
            "manifest.retained.json",
        ]
    )
    report = capsys.readouterr().out.splitlines()
    assert report[report.index("published: 3 uploaded, 2 deleted; 4 URL(s) to purge:") + 1 :] == [
        "https://example.org/gpu/index.html",
        "https://example.org/gpu/",
        "https://example.org/gpu/pagefind/index/ru_aaaaaa.pf_index",
        "https://example.org/gpu/style.aaaaaaaaaa.css",
        "kept, not purged: 2 file(s) of an earlier release that cached pages may still load;",
        "deleted by the first publish at least one release and 7 days after they left the site:",
        "  pagefind/index/ru_bbbbbb.pf_index",
        "  style.bbbbbbbbbb.css",
    ]
