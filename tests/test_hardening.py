"""Hostile inputs, second round: every one is refused or handled with its exit code, never a traceback.

One test per problem of the hardening issue (serve's port and address, reserved names, the article
sandbox's memory, publish's paths and settings, the calculator's CSV, article front matter, estimate,
SOURCE_DATE_EPOCH, diff, Ctrl-C, the base URL, serve's links and idle clients, the build's children),
and two fuzz tests that count exit codes: no input gives 1 (a bug).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ROOT, SOURCES
from pipeline.__main__ import main

SHA = "0" * 64


# --- 2. serve: a busy, impossible or foreign port or address is one line and exit 3 ---------------------------


@pytest.mark.parametrize("bind, port", [("127.0.0.1", "taken"), ("127.0.0.1", 99999), ("8.8.8.8", 0)])
def test_serve_on_a_port_or_address_it_cannot_have_exits_3_in_one_line(tmp_path, capsys, bind, port):
    from pipeline.tools.serve import serve

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        if port == "taken":
            port = taken.getsockname()[1]
        assert serve(SOURCES, tmp_path / "out", port=port, bind=bind) == 3
    err = capsys.readouterr().err
    assert f"не удаётся занять адрес {bind}:{port}: " in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_serve_port_out_of_range_is_a_usage_error(capsys):
    for port in ("99999", "-1", "80x"):
        with pytest.raises(SystemExit) as info:
            main(["serve", "--port", port])
        assert info.value.code == 64
    assert "нужно целое число от 0 до 65535" in capsys.readouterr().err


def test_serve_listens_on_ipv6(tmp_path):
    from pipeline.tools.serve import EditorServer, Handler

    try:
        server = EditorServer(("::1", 0), Handler)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    assert server.socket.family == socket.AF_INET6
    server.server_close()


# --- 3. reserved names: no id and no article replaces one of the site's own pages ---------------------------


def test_every_page_a_build_writes_at_the_top_of_a_folder_is_reserved(built):
    from pipeline.render.site import read_articles
    from pipeline.schema import RESERVED_NAMES

    site = built / "site"
    articles = {a.slug for a in read_articles()}
    top = {p.stem for p in site.glob("*.html")} - articles
    folders = {p.stem for p in site.glob("*/*.html") if p.parent.name in ("models", "methods", "gpus", "servers")}
    assert top <= RESERVED_NAMES and "index" in folders & RESERVED_NAMES


def test_an_id_that_names_a_page_of_the_site_is_refused_by_check_and_build():
    import duckdb
    import polars as pl

    from pipeline.build import path_id_problems
    from pipeline.load import LINE
    from pipeline.problems import Validation
    from pipeline.schema import TABLES_BY_NAME
    from pipeline.validate import reserved_ids

    columns = [f.name for f in TABLES_BY_NAME["gpus"].fields if f.type == "id"]
    rows = [{LINE: 2, **dict.fromkeys(columns, "h100-sxm")}, {LINE: 3, **dict.fromkeys(columns, "ok")}]
    rows[1]["gpu_id"] = "index"
    frame = pl.DataFrame(rows)
    [problem] = path_id_problems({"gpus": frame}, Path("sources"))
    assert (problem.line, problem.column, problem.value) == (3, "gpu_id", "index")
    assert problem.rule.startswith("это имя служебной страницы сайта (404, accuracy, calculator,")

    con = duckdb.connect()
    con.execute(f"CREATE TABLE raw_gpus ({LINE} INTEGER, {', '.join(f'{c} VARCHAR' for c in columns)})")
    marks = ", ".join("?" * (len(columns) + 1))
    con.executemany(f"INSERT INTO raw_gpus VALUES ({marks})", [[r[LINE], *(r[c] for c in columns)] for r in rows])
    out = Validation()
    reserved_ids(con, Path("sources"), {"gpus"}, out)
    assert [(p.line, p.column, p.value) for p in out.problems] == [(3, "gpu_id", "index")]
    assert [c.failures for c in out.checks] == [1]


@pytest.mark.parametrize("name", ["index", "data", "404", "calculator"])
def test_an_article_named_as_a_page_of_the_site_is_refused(tmp_path, name):
    from pipeline.problems import TemplateError
    from pipeline.render.site import read_articles

    (tmp_path / "articles").mkdir()
    (tmp_path / "articles" / f"{name}.md").write_text("---\ntitle: T\ndescription: D\norder: 1\nlabel: L\n---\nТекст\n")
    with pytest.raises(TemplateError) as info:
        read_articles(tmp_path)
    [problem] = info.value.problems
    assert problem.file == f"site_templates/articles/{name}.md"
    assert problem.rule.startswith(f"статья «{name}» названа так же, как служебная страница сайта")


# --- 4. the article sandbox: a memory budget, checked before a value is made --------------------------------


def render_body(body: str) -> str:
    from pipeline.render.site import article_environment, render_lines

    env = article_environment({"a": (body, "a.md")})
    return render_lines(env.get_template("a"), {})[0]


DOUBLING = "{% set ns = namespace(s='ab') %}{% for i in range(30) %}{% set ns.s = ns.s OP ns.s %}{% endfor %}"


@pytest.mark.parametrize(
    "body, size",
    [
        (DOUBLING.replace("OP", "~"), 1_048_576),
        (DOUBLING.replace("OP", "+"), 1_048_576),
        ("{{ range(1000)|join('x' * 100000) }}", 99_902_890),
        ("{{ ('y' * 100000).join(range(1000)|map('string')) }}", 99_902_890),
        ("{{ ('a' * 1000)|replace('a', 'b' * 100000) }}", 100_000_000),
        ("{{ ('a' * 1000).replace('a', 'b' * 100000) }}", 100_000_000),
        ("{% set s = 'a' * 900000 %}{{ '%s%s' % (s, s) }}", 1_800_004),
    ],
)
def test_the_sandbox_refuses_a_value_over_its_limit_before_making_it(body, size):
    from jinja2.sandbox import SecurityError

    started = time.perf_counter()
    with pytest.raises(SecurityError) as info:
        render_body(body)
    assert (
        str(info.value) == f"значение длиной {size} знаков или элементов слишком длинное для статьи (предел — 1000000)"
    )
    assert time.perf_counter() - started < 2


def test_the_sandbox_refuses_many_large_values_in_all_and_allows_ordinary_ones():
    from jinja2.sandbox import SecurityError

    many = "{% set ns = namespace(l=[]) %}{% for i in range(200) %}{% set ns.l = ns.l + [('a' * 500000) ~ i] %}{% endfor %}"
    with pytest.raises(SecurityError, match="больше 64000000 знаков в сумме"):
        render_body(many)
    ordinary = (
        "{{ 'a' ~ 1 ~ 'b' }} {{ [1, 2]|join(', ') }} {{ 'abc'|replace('b', 'x') }} {{ 1 + 2 }} {{ ([1] + [2])|length }}"
    )
    assert render_body(ordinary) == "a1b 1, 2 axc 3 2"


# --- 5, 6. publish: only the site's own files, never through a link; bad settings are exit 3 -----------------


class FakeStorage:
    """The S3 calls publish makes, in memory: the published manifest (None: none yet) and the uploads."""

    def __init__(self, remote: bytes | None = None):
        self.remote, self.uploads = remote, {}

    def get_object(self, Bucket, Key):  # noqa: N803 (boto3's names)
        from botocore.exceptions import ClientError

        if self.remote is None:
            raise ClientError({"Error": {"Code": "NoSuchKey"}}, "GetObject")
        return {"Body": type("Body", (), {"read": lambda _: self.remote})()}

    def upload_fileobj(self, f, bucket, key, ExtraArgs):  # noqa: N803
        self.uploads[key] = f.read()

    def put_object(self, Bucket, Key, Body, **kwargs):  # noqa: N803 (the kept files' list)
        self.uploads[Key] = Body

    def delete_objects(self, Bucket, Delete):  # noqa: N803
        pass


def a_build(tmp_path: Path, files: dict) -> Path:
    out = tmp_path / "out"
    (out / "site").mkdir(parents=True)
    (out / "site" / "index.html").write_text("<p>ok</p>")
    (out / "site" / "manifest.json").write_text(json.dumps({"files": files}))
    return out


@pytest.mark.parametrize("name", ["../../../../../etc/hostname", "/etc/hostname", "a/../../x", "x\\y", "a//b"])
def test_publish_uploads_nothing_a_manifest_names_outside_the_site(tmp_path, monkeypatch, name):
    from pipeline.tools import publish_s3

    storage = FakeStorage()
    monkeypatch.setattr(publish_s3, "client", lambda endpoint: storage)
    out = a_build(tmp_path, {"index.html": SHA, name: SHA})
    with pytest.raises(publish_s3.PublishError) as info:
        publish_s3.publish(out, "s3://bucket")
    assert info.value.code == 2 and repr(name) in str(info.value)
    assert storage.uploads == {}


def test_publish_never_follows_a_symbolic_link(tmp_path, monkeypatch):
    from pipeline.tools import publish_s3

    storage = FakeStorage()
    monkeypatch.setattr(publish_s3, "client", lambda endpoint: storage)
    out = a_build(tmp_path, {"index.html": SHA, "secret.txt": SHA, "deep/page.html": SHA})
    (tmp_path / "secret").write_text("not the site's")
    (out / "site" / "secret.txt").symlink_to(tmp_path / "secret")
    with pytest.raises(publish_s3.PublishError) as info:
        publish_s3.publish(out, "s3://bucket")
    assert info.value.code == 2 and "secret.txt" in str(info.value)
    (out / "site" / "secret.txt").unlink()
    (out / "site" / "secret.txt").write_text("s")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "page.html").write_text("p")
    (out / "site" / "deep").symlink_to(tmp_path / "elsewhere")  # a folder on the way
    with pytest.raises(publish_s3.PublishError) as info:
        publish_s3.publish(out, "s3://bucket")
    assert info.value.code == 2 and "deep" in str(info.value)
    (out / "site" / "secret.txt").unlink()
    (out / "site" / "secret.txt").symlink_to(tmp_path / "secret")
    with pytest.raises(publish_s3.PublishError) as info:
        publish_s3.publish(out, "s3://bucket")
    assert info.value.code == 2 and "secret.txt" in str(info.value) and "deep" in str(info.value)  # both named
    assert storage.uploads == {}  # every file is opened before anything is written to the store


@pytest.mark.parametrize(
    "setting, value",
    [
        ("--endpoint-url", "http://[::1"),
        ("--endpoint-url", "not a url at all"),
        ("AWS_PROFILE", "no-such-profile"),
        ("AWS_DEFAULT_REGION", "bad region!"),
        ("AWS_CONFIG_FILE", "bad"),
    ],
)
def test_publish_with_unusable_storage_settings_exits_3_in_one_line(tmp_path, monkeypatch, capsys, setting, value):
    out = a_build(tmp_path, {"index.html": SHA})
    for name, default in {
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, default)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    args = ["publish", "--to", "s3://bucket", "--out", str(out), "--dry-run"]
    if setting.startswith("--"):
        args += [setting, value]
    elif setting == "AWS_CONFIG_FILE":
        (tmp_path / "config").write_text("[default\nregion = \n  = broken")
        monkeypatch.setenv(setting, str(tmp_path / "config"))
        monkeypatch.setenv("AWS_PROFILE", "default")
    else:
        monkeypatch.setenv(setting, value)
    assert main(args) == 3
    err = capsys.readouterr().err
    assert err.startswith("publish: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "manifest",
    [
        b"not json",
        b"[]",
        b'{"files": []}',
        b'{"files": {"index.html": 5}}',
        b'{"files": {"../x": "' + SHA.encode() + b'"}}',
    ],
)
def test_publish_refuses_a_malformed_manifest_here_or_in_the_bucket(tmp_path, monkeypatch, manifest):
    from pipeline.tools import publish_s3

    monkeypatch.setattr(publish_s3, "client", lambda endpoint: FakeStorage(remote=manifest))
    out = a_build(tmp_path, {"index.html": SHA})
    with pytest.raises(publish_s3.PublishError) as remote:
        publish_s3.publish(out, "s3://bucket/p")
    assert remote.value.code == 2 and "s3://bucket/p/manifest.json" in str(remote.value)
    (out / "site" / "manifest.json").write_bytes(manifest)
    with pytest.raises(publish_s3.PublishError) as local:
        publish_s3.publish(out, "s3://bucket/p")
    assert local.value.code == 2 and "manifest.json" in str(local.value)


# --- 7. the calculator's CSV download: formula-like cells are inert -----------------------------------------


def test_the_calculator_csv_makes_formulas_inert_as_the_downloads_do():
    import shutil

    from pipeline.render import format as fmt

    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    script = ROOT / "site_templates" / "static" / "calculator.js"
    code = (
        f"import {{ spreadsheetSafe, FORMULA_PREFIXES }} from {json.dumps(script.as_uri())};"
        "const cells = JSON.parse(process.argv[1]);"
        "console.log(JSON.stringify([FORMULA_PREFIXES, cells.map(spreadsheetSafe)]));"
    )
    cells = ["+8 × B300", "=HYPERLINK(1)", "-1", "@x", "\tx", "8 × B300", "1 200"]
    run = subprocess.run(["node", "--input-type=module", "-e", code, json.dumps(cells)], capture_output=True, text=True)
    prefixes, shown = json.loads(run.stdout)
    assert tuple(prefixes) == fmt.FORMULA_PREFIXES
    assert (
        shown
        == [fmt.spreadsheet_safe(c) for c in cells]
        == ["'+8 × B300", "'=HYPERLINK(1)", "'-1", "'@x", "'\tx", "8 × B300", "1 200"]
    )


# --- 8. article front matter: every problem is a line of the report (exit 2) ---------------------------------


@pytest.mark.parametrize(
    "data, line, rule",
    [
        (b"---\ndescription: D\norder: 1\nlabel: L\n---\nx", 1, "в заголовке статьи нет ключа title или он пуст"),
        (
            b"---\ntitle: T\ndescription: D\norder: first\nlabel: L\n---\nx",
            4,
            "order: 'first' — нужно целое число (место статьи в навигации)",
        ),
        (b"# no front matter\n", 1, "статья начинается не со строки «---»"),
        (b"---\ntitle: T\n\xff\xfe\n---\n", 3, "файл не в кодировке UTF-8; сохраните его в UTF-8"),
        (b"---\ntitle: T\ndescription: D\norder: 1\n---\nx", 1, "в заголовке статьи нет ключа label или он пуст"),
        (b"---\ntitle: T\ntitle: U\n---\nx", 3, "ключ title задан дважды"),
        ("---\ntitle: T\nотзыв\n---\nx".encode(), 3, "строка заголовка «отзыв» — не «ключ: значение»"),
        (b"---\ntitle: T\n", 1, "заголовок статьи не закрыт строкой «---»"),
    ],
)
def test_a_broken_front_matter_is_reported_with_its_line(data, line, rule):
    from pipeline.render.site import FrontMatterError, parse_article

    with pytest.raises(FrontMatterError) as info:
        parse_article("moya-statya", data)
    assert info.value.line == line and str(info.value).startswith(rule)


def test_a_label_without_a_space_is_read():
    from pipeline.render.site import parse_article

    article = parse_article("a", b"---\ntitle:T\ndescription: D\norder: -2\nlabel:L\nnav: false\n---\nx\n")
    assert (article.title, article.order, article.nav, article.in_nav, article.body, article.line) == (
        "T",
        -2,
        "L",
        False,
        "x\n",
        8,
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(
        st.one_of(
            st.sampled_from(
                ["title: T", "description: D", "order: 1", "label: L", "nav: false", "order: x", "---", ""]
            ),
            st.text(max_size=30),
        ),
        max_size=8,
    ),
    prefix=st.sampled_from(["---\n", "", "\ufeff---\n", "---\r\n"]),
    tail=st.binary(max_size=8),
)
def test_fuzzed_front_matter_never_exits_1(tmp_path_factory, lines, prefix, tail):
    from pipeline.problems import TemplateError
    from pipeline.render.site import read_articles

    templates = tmp_path_factory.mktemp("t")
    (templates / "articles").mkdir()
    (templates / "articles" / "a.md").write_bytes(
        (prefix + "\n".join(lines) + "\n---\n").encode("utf-8", "surrogatepass") + tail
    )
    try:
        read_articles(templates)
        code = 0
    except TemplateError as exc:  # what run_command reports with exit 2
        assert all(p.file == "site_templates/articles/a.md" and p.rule for p in exc.problems)
        code = 2
    assert code in (0, 2)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    manifest=st.one_of(
        st.binary(max_size=40),
        st.recursive(
            st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20), st.just(SHA)),
            lambda children: (
                st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=12), children, max_size=3)
            ),
            max_leaves=8,
        ).map(lambda files: json.dumps({"files": files}).encode()),
        st.dictionaries(
            st.one_of(
                st.sampled_from(["index.html", "../x", "/etc/passwd", "a/./b", "manifest.json", "x\x00"]),
                st.text(max_size=12),
            ),
            st.sampled_from([SHA, "", "zz"]),
            max_size=4,
        ).map(lambda files: json.dumps({"files": files}).encode()),
    ),
    remote=st.booleans(),
)
def test_fuzzed_manifests_never_exit_1(tmp_path_factory, monkeypatch, capsys, manifest, remote):
    from pipeline.tools import publish_s3

    monkeypatch.setattr(publish_s3, "client", lambda endpoint: FakeStorage(remote=manifest if remote else None))
    out = a_build(tmp_path_factory.mktemp("m"), {"index.html": SHA})
    if not remote:
        (out / "site" / "manifest.json").write_bytes(manifest)
    assert main(["publish", "--to", "s3://bucket", "--out", str(out), "--base-url", "/"]) in (0, 2)
    assert "Traceback" not in capsys.readouterr().err


# --- 9. estimate's ranges, SOURCE_DATE_EPOCH, diff's rows and its exit codes --------------------------------


def test_estimate_tokens_beyond_any_training_run_are_refused(capsys):
    with pytest.raises(SystemExit) as info:
        main(["estimate", "--model", "llama-3-1-8b", "--tokens", "1e30", "--server", "x"])
    assert info.value.code == 2 and "at most 1e15 tokens" in capsys.readouterr().err


@pytest.mark.parametrize("epoch", ["abc", "1e9", "99999999999999", "-5", "١٢٣"])
def test_an_unusable_source_date_epoch_is_one_line_and_exit_3(monkeypatch, capsys, epoch):
    from pipeline import fingerprint
    from pipeline.problems import ConfigError

    with pytest.raises(ConfigError):
        fingerprint.epoch_date(epoch)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
    assert main(["check", "--sources", str(SOURCES)]) == 3
    err = capsys.readouterr().err
    assert err.startswith("Ошибка настройки: SOURCE_DATE_EPOCH=") and len(err.strip().splitlines()) == 1
    assert fingerprint.epoch_date("1700000000").isoformat() == "2023-11-14"


def a_published(root: Path, models: str) -> Path:
    (root / "site" / "data").mkdir(parents=True)
    (root / "site" / "data" / "models.csv").write_text(models, encoding="utf-8")
    return root


def test_diff_tells_changes_from_an_error(tmp_path, capsys):
    from pipeline.tools.diff import run

    header = "model_id,display_name\n"
    old = a_published(tmp_path / "old", header + "m1,Один\n")
    new = a_published(tmp_path / "new", header + "m1,Два\n")
    short = a_published(tmp_path / "short", header + "m1\n")
    assert run(old, old) == 0
    assert run(new, old) == 4
    capsys.readouterr()
    assert run(short, old) == 3
    err = capsys.readouterr().err
    assert "не удалось сравнить" in err and "has not the 2 cells of the header" in err and "Traceback" not in err


# --- 10. Ctrl-C: whatever the interrupt broke on its way is reported as the interrupt -------------------------


def test_an_error_caused_by_ctrl_c_is_reported_as_the_interrupt(monkeypatch, tmp_path, capsys):
    import pipeline.build

    def interrupted_import(*args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except KeyboardInterrupt:  # as a library that imports pandas lazily reports it
            raise ImportError("'pandas' is required for this function but is not installed") from None

    monkeypatch.setattr(pipeline.build, "build", interrupted_import)
    assert main(["build", "--sources", str(SOURCES), "--out", str(tmp_path / "out")]) == 130
    assert "Прервано" in capsys.readouterr().err


def test_a_forked_child_ignores_ctrl_c_and_dies_with_its_parent(tmp_path):
    """The parent of a start_map is SIGKILLed: its child, blocked in a long item, ends too."""
    if (os.cpu_count() or 1) < 2 or not sys.platform.startswith("linux"):
        pytest.skip("start_map forks only with two cores; PR_SET_PDEATHSIG is Linux's")
    script = textwrap.dedent(
        """
        import os, time
        from pipeline import parallel
        parallel.WORKERS = 2
        finish = parallel.start_map(lambda i: time.sleep(60), [1], alone=True)
        print(os.getpid(), flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        pid = int(parent.stdout.readline())
        children = Path(f"/proc/{pid}/task/{pid}/children")
        deadline = time.monotonic() + 5
        while not children.read_text().split() and time.monotonic() < deadline:
            time.sleep(0.05)
        [child] = [int(c) for c in children.read_text().split()]
        os.kill(child, signal.SIGINT)  # ignored: Ctrl-C is the parent's
        time.sleep(0.3)
        assert "State:\tZ" not in Path(f"/proc/{child}/status").read_text()
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            status = Path(f"/proc/{child}/status")
            if not status.exists() or "State:\tZ" in status.read_text():
                break
            time.sleep(0.05)
        assert not Path(f"/proc/{child}/status").exists() or "State:\tZ" in Path(f"/proc/{child}/status").read_text()
    finally:
        parent.kill()


# --- 11. the base URL: an http(s) address or a path, nothing else --------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)//",
        "//evil.example/",
        "/a//b/",
        "data:text/html,x",
        '/"><script>',
        "https://a b/",
        "",
        "gpu/",
    ],
)
def test_a_base_url_that_is_neither_http_nor_a_path_is_refused(monkeypatch, capsys, tmp_path, url):
    from pipeline.build import build
    from pipeline.problems import ConfigError
    from pipeline.render.site_links import check_base_url

    with pytest.raises(ValueError):
        check_base_url(url)
    with pytest.raises(SystemExit) as info:
        main(["build", "--out", str(tmp_path / "out"), "--base-url", url])
    assert info.value.code == 64
    monkeypatch.setenv("SITE_BASE_URL", url or "x")
    assert main(["build", "--out", str(tmp_path / "out")]) == 3
    assert "Ошибка настройки: SITE_BASE_URL" in capsys.readouterr().err
    with pytest.raises(ConfigError):
        build(SOURCES, tmp_path / "out", base_url=url)
    assert not (tmp_path / "out").exists()


def test_http_addresses_and_paths_are_accepted():
    from pipeline.render.site_links import check_base_url

    for url in ("/", "/gpu/", "https://example.org", "https://example.org/docs/gpu/", "http://localhost:8000/b/"):
        assert check_base_url(url) == url


# --- 12. serve: no link out of the site, no worker held by a silent client -----------------------------------


@pytest.fixture
def tiny_loop(tmp_path):
    from pipeline.tools.serve import EditorLoop

    site = tmp_path / "out" / "site"
    site.mkdir(parents=True)
    (site / "index.html").write_text("<html><body>главная</body></html>")
    (site / "real").mkdir()
    (site / "real" / "page.html").write_text("<html><body>страница</body></html>")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (site / "secret.txt").symlink_to(outside / "secret.txt")
    (site / "folder").symlink_to(outside)
    (site / "real" / "index.html").symlink_to(site / "index.html")
    loop = EditorLoop(SOURCES, tmp_path / "out", port=0, quiet=True).start(build_first=False)
    yield loop
    loop.stop()


def get(loop, path: str, timeout: float = 10) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(loop.url.rstrip("/") + path, timeout=timeout) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_serve_never_follows_a_link_planted_in_the_site(tiny_loop):
    assert get(tiny_loop, "/real/page.html")[0] == 200
    for path in ("/secret.txt", "/folder/secret.txt", "/folder/", "/real/"):
        status, body = get(tiny_loop, path)
        assert status == 404 and b"secret" not in body, path


def test_a_hundred_silent_clients_do_not_delay_a_request(tiny_loop):
    port = tiny_loop.server.server_address[1]
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
    try:
        started = time.perf_counter()
        assert get(tiny_loop, "/real/page.html", timeout=5)[0] == 200
        assert time.perf_counter() - started < 2
    finally:
        for s in silent:
            s.close()
