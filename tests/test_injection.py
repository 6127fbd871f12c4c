"""Hostile cell values reach every output format inert: HTML, Markdown, CSV; unsafe ids never become paths."""

import csv
import re
from pathlib import Path

import pytest

from conftest import edit_csv
from pipeline.__main__ import build, load_and_validate
from pipeline.format import spreadsheet_safe
from pipeline.problems import DataError
from pipeline.validate import HIDDEN_RULE

SCRIPT = "<script>alert(1)</script>"
FORMULA = '=HYPERLINK("http://evil.example/x","y")'
MARKDOWN = "[click](javascript:alert(1)) *bold* | pipe `code`"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    import shutil

    from conftest import SOURCES

    root = tmp_path_factory.mktemp("hostile")
    sources = root / "sources"
    shutil.copytree(SOURCES, sources)
    edit_csv(sources / "servers.csv", "hgx-b300-8x,8 × B300,", f'hgx-b300-8x,"{SCRIPT}",')
    edit_csv(
        sources / "gpus.csv",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition,RTX PRO 6000,",
        f'NVIDIA RTX PRO 6000 Blackwell Server Edition,"{FORMULA.replace(chr(34), chr(34) * 2)}",',
    )
    edit_csv(sources / "models.csv", "generic-70b,Модель 70 млрд,", f'generic-70b,"{MARKDOWN}",')
    build(sources, root / "output")
    return root / "output"


def test_html_is_escaped(hostile):
    for page in (hostile / "site").glob("*.html"):
        html = page.read_text(encoding="utf-8")
        # The only scripts are the site's own modules, loaded by src.
        # The only scripts are the site's own modules (by src) and JSON data islands with no "<" inside.
        own = re.findall(r'<script type="module" src="[^"<>]+"></script>', html)
        islands = re.findall(r'<script type="application/json" id="[a-z-]+">[^<]*</script>', html)
        assert len(re.findall(r"<script\b", html)) == len(own) + len(islands), page.name
        assert own, page.name
        assert "alert(1)</script>" not in html, page.name
        assert 'href="javascript' not in html, page.name
    article = (hostile / "site" / "finetune-memory.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in article
    assert "<em>bold</em>" not in article and "<code>code</code>" not in article
    assert "[click](javascript:alert(1)) *bold* | pipe `code`" in article.replace("&#x27;", "'")


def table_rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("| ")]


def test_markdown_is_escaped(hostile):
    text = (hostile / "markdown" / "finetune-memory.md").read_text(encoding="utf-8")
    assert "<script" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "\\[click\\](javascript:alert(1)) \\*bold\\* \\| pipe \\`code\\`" in text
    # Every row of every table has as many unescaped cell separators as its header.
    blocks = [b for b in text.split("\n\n") if b.startswith("| ")]
    assert len(blocks) >= 6
    for block in blocks:
        counts = {len(re.findall(r"(?<!\\)\|", row)) for row in block.splitlines()}
        assert len(counts) == 1, block[:80]


def test_csv_neutralises_formulas_but_not_numbers(hostile):
    with (hostile / "site" / "data" / "gpus.csv").open(encoding="utf-8-sig") as f:
        gpus = {row["gpu_id"]: row for row in csv.DictReader(f)}
    assert gpus["rtx-pro-6000"]["short_name"] == "'" + FORMULA
    assert gpus["rtx-pro-6000"]["memory_gb"] == "96.0"
    with (hostile / "site" / "data" / "servers.csv").open(encoding="utf-8-sig") as f:
        servers = {row["server_id"]: row for row in csv.DictReader(f)}
    assert servers["hgx-b300-8x"]["display_name"] == SCRIPT


@pytest.mark.parametrize(
    "text, safe",
    [
        ("=1+1", "'=1+1"),
        ("+7 499", "'+7 499"),
        ("-5", "'-5"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("H100", "H100"),
        ("", ""),
        (None, None),
    ],
)
def test_spreadsheet_safe(text, safe):
    assert spreadsheet_safe(text) == safe


@pytest.mark.parametrize(
    "new, rule",
    [
        ("../../x", "ids use lowercase latin letters and digits, joined by '-' or '_'"),
        ("index", None),  # a plain id is fine
    ],
)
def test_path_like_ids_are_rejected(sources, new, rule):
    edit_csv(sources / "models.csv", "phi-4,", f"{new},")
    if rule is None:
        load_and_validate(sources)
        return
    with pytest.raises(DataError) as info:
        load_and_validate(sources)
    assert [str(p) for p in info.value.problems] == [f'{sources}/models.csv:32: model_id = "{new}": {rule}']


@pytest.mark.parametrize(
    "name, rule",
    [
        ("x" * 10_000, "longer than 200 characters"),
        ("Phi\u200f-4", HIDDEN_RULE),
        ("Phi\u202e4-", HIDDEN_RULE),
    ],
)
def test_hostile_names_are_rejected(sources, name, rule):
    edit_csv(sources / "models.csv", "phi-4,Phi-4 (14B),", f"phi-4,{name},")
    with pytest.raises(DataError) as info:
        load_and_validate(sources)
    assert [p.rule for p in info.value.problems] == [rule]
    assert [p.line for p in info.value.problems] == [32]
