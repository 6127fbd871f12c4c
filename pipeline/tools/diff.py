"""What a build changes compared with the last published one, in the editor's terms.

Two output folders are compared through their downloads, with the schema registry: the source
tables' CSVs (a catalog's few thousand rows) row by row, for changed values by entity and added and
removed rows; the derived tables (10^7 rows of server_fit and recommendations at scale) counted by
DuckDB, a piece at a time and spilling to a temporary folder beyond MEMORY_LIMIT, from their Parquet
files (from their CSVs, as text, where a build has none); then the pages and files whose content
differs, read a piece at a time. The report is Russian (it is read by editors);
its words are in the message catalogue with the other terminal texts.

Exit codes of `python -m pipeline diff`: 0 nothing changed, 4 something changed, 3 the folders
could not be compared (one is missing or is not a build, a file cannot be read or is not what a build
writes), 64 a wrong command line; 1 stays a bug's (a traceback), so a crash never reads as "changes". The report is printed in any locale:
where the terminal's encoding has no Cyrillic, the text keeps its letters as \\u escapes and JSON is
written in ASCII (both still readable by a tool), with a note on stderr.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import json
import os
import sys
from pathlib import Path

from pipeline import verdicts
from pipeline.messages import catalogue, message
from pipeline.render import format as fmt
from pipeline.schema import ALL_TABLES, TABLES_BY_NAME, Field, Table
from pipeline.tools import table_changes
from pipeline.tools.release import DataFiles, TableFiles, parquet_in_both

EXIT_SAME, EXIT_CHANGED, EXIT_ERROR = 0, 4, 3
DATABASE = "gpu-finetune.duckdb"
# Files that list or stamp the whole build: they change whenever anything does.
IGNORED = {"manifest.json"}

# The column that names an entity of each table for a reader; other tables are named by their key.
NAME_COLUMNS = {
    "references": "title",
    "methods": "name_ru",
    "models": "display_name",
    "gpus": "name",
    "servers": "display_name",
}
# The report's words are the message catalogue's [diff] (site_templates/messages.toml); the entity of
# each source table, for the added/removed lists, is its [diff.nouns].
NOUNS: dict[str, str] = catalogue()["diff"]["nouns"]
# The catalogue keys of the report's sections and of a derived table's counts.
PARTS = {
    "values": "diff.values",
    "added": "diff.added",
    "removed": "diff.removed",
    "pages": "diff.pages",
    "downloads": "diff.downloads",
    "markdown": "diff.markdown",
    "other": "diff.other",
}
DERIVED = {"changed": "diff.derived_changed", "added": "diff.derived_added", "removed": "diff.derived_removed"}
BOOLEANS = {"true": "diff.true", "false": "diff.false"}
HINTS = {"out": "diff.hint_out", "against": "diff.hint_against"}


def read_table(out: Path, table: Table) -> dict[tuple, dict[str, str]] | None:
    """Rows of a download keyed by primary key, values as the CSV's text; None if the file is absent."""
    path = out / "site" / "data" / table.file
    if not path.is_file():
        return None
    with path.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    for row in rows:
        if None in row or None in row.values():  # csv.DictReader's filler for too many or too few cells
            raise csv.Error(f"{path}: a row has not the {len(reader.fieldnames or [])} cells of the header")
    return {tuple(row[k] for k in table.primary_key): row for row in rows}


def _unformula(text: str) -> str:
    # Downloads prefix formula-like text with "'" (OWASP); the editor typed it without.
    return text[1:] if text.startswith("'") and text[1:].startswith(fmt.FORMULA_PREFIXES) else text


def show(field: Field, text: str) -> str:
    """A cell as the site shows it (Russian number format), without its unit."""
    if text == "":
        return message("diff.empty")
    if field.type == "int":
        return fmt.integer(int(text))
    if field.type == "float":
        return fmt.gb(float(text)) if field.unit == "gb" else fmt.number(float(text), 6)
    if field.type == "date":
        return fmt.date(dt.date.fromisoformat(text))
    if field.type == "bool":
        return message(BOOLEANS[text])
    if field.type == "str":
        return f"«{_unformula(text)}»"
    return text


def label(field: Field) -> str:
    """The column's label without its unit (its unit suffix dropped): the unit follows the values."""
    text = field.label_ru or field.name
    return text.removesuffix(f", {field.unit_label}") if field.unit else text


class Names:
    """Readable names of entities, from both builds (the new name wins)."""

    def __init__(self, new: dict[str, dict], old: dict[str, dict]):
        self.names: dict[tuple[str, str], str] = {}
        for tables in (old, new):
            for name, column in NAME_COLUMNS.items():
                for key, row in (tables.get(name) or {}).items():
                    self.names[(name, key[0])] = _unformula(row[column])

    def entity(self, table: Table, key: tuple) -> str:
        """A row's entity: its name, or its key with ids replaced by names and numbers formatted."""
        if table.name in NAME_COLUMNS:
            return self.names.get((table.name, key[0]), key[0])
        parts = []
        for column, value in zip(table.primary_key, key, strict=True):
            field = table.field(column)
            target = field.references.split(".")[0] if field.references else table.name
            if (target, value) in self.names:
                parts.append(self.names[(target, value)])
            elif field.type in ("int", "float"):
                parts.append(f"{show(field, value)} {field.unit_label}".strip())
            else:
                parts.append(value)
        return ", ".join(parts)


def compare_table(table: Table, new: dict, old: dict, names: Names) -> dict:
    """One table's difference between two builds: rows added and removed (by key) and every changed value."""
    added = [k for k in new if k not in old]
    removed = [k for k in old if k not in new]
    columns = [f for f in table.fields if f.name not in table.primary_key]
    values = []
    for key in (k for k in new if k in old):
        for field in columns:
            before, after = old[key].get(field.name, ""), new[key].get(field.name, "")
            if before == after:
                continue
            entity = names.entity(table, key)
            unit = f" {field.unit_label}" if field.unit else ""
            values.append(
                {
                    "table": table.name,
                    "key": list(key),
                    "column": field.name,
                    "old": before,
                    "new": after,
                    "text": f"{label(field)} {entity}: {show(field, before)} → {show(field, after)}{unit}",
                }
            )

    def listed(keys: list[tuple], tables: dict) -> list[dict]:
        noun = NOUNS.get(table.name, table.title_ru)
        out = []
        for key in keys:
            entity = names.entity(table, key)
            shown = entity if entity == ", ".join(key) else f"{entity} ({', '.join(key)})"
            out.append({"table": table.name, "key": list(key), "text": f"{noun}: {shown}"})
        return out

    return {"values": values, "added": listed(added, new), "removed": listed(removed, old)}


def _files(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        return {}
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file() and p.name not in IGNORED}


def _table_files(out: Path, table: Table) -> TableFiles:
    """A table's downloads in the build `out` (release.TableFiles, which release compares through too)."""
    return TableFiles(DataFiles(folder=out / "site" / "data"), table.name, table.file)


def _relation(files: TableFiles, parquet: bool) -> str | None:
    """The SQL that reads a table's download (its Parquet file, or its CSV as text), None if absent."""
    return files.relation(parquet) if files.present(parquet) else None


def summarise_derived(con, table: Table, new_out: Path, old_out: Path) -> dict:
    """A derived table's difference between two builds (table_changes.count_changes): rows added, removed
    and changed (by key) and the columns that changed."""
    new_files, old_files = _table_files(new_out, table), _table_files(old_out, table)
    parquet = parquet_in_both(new_files, old_files)
    new, old = _relation(new_files, parquet), _relation(old_files, parquet)
    if new is None or old is None:
        rows = 0 if new is None and old is None else table_changes.count_rows(con, new or old)
        return {"changed": 0, "added": rows if new else 0, "removed": rows if old else 0, "columns": []}
    return table_changes.count_changes(con, new, old, table.primary_key, [f.name for f in table.fields])


def first_ranked(con, files: TableFiles, parquet: bool) -> dict[tuple, dict[str, str]]:
    """The rank-1 rows of a build's recommendations (a job's plan; `files`, its downloads), as
    plan_changes reads them: the columns it needs, as text; {} when the build has none."""
    relation = _relation(files, parquet)
    if relation is None:
        return {}
    names = ("model_id", "method_id", "rank", "server_id", "recommended")
    picked = ", ".join(f"coalesce(CAST({table_changes.ident(c)} AS VARCHAR), '')" for c in names)
    rows = con.execute(
        f"SELECT {picked} FROM {relation} WHERE CAST({table_changes.ident('rank')} AS VARCHAR) = '1'"
    ).fetchall()
    return {(r[0], r[1], r[3]): dict(zip(names, r, strict=True)) for r in rows}


COMPARED_BYTES = 1 << 20  # what _same reads of each file at a time


def _same(a: Path, b: Path) -> bool:
    """Whether two files hold the same bytes, read a piece at a time: a 10^7-row build's CSV is 3 GB,
    which reading whole held twice over (the DuckDB file is compared by what it holds)."""
    if a.name == DATABASE:  # its header holds a random id: compare what it holds
        return table_changes.database_tables(a) == table_changes.database_tables(b)
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as first, open(b, "rb") as second:
        while True:
            piece = first.read(COMPARED_BYTES)
            if piece != second.read(COMPARED_BYTES):
                return False
            if not piece:
                return True


def compare_files(new_root: Path, old_root: Path) -> dict[str, list[str]]:
    """Paths (relative to the roots) whose content differs; a new or gone file counts too."""
    new, old = _files(new_root), _files(old_root)
    return {
        "changed": [p for p in new if p in old and not _same(new[p], old[p])],
        "added": [p for p in new if p not in old],
        "removed": [p for p in old if p not in new],
    }


PRICE_FIELDS = ("price_rub_month", "price_rub_hour", "min_term_months")


def stale_prices(new: dict[tuple, dict[str, str]], old: dict[tuple, dict[str, str]]) -> list[dict]:
    """Servers (rows of servers.csv by key) whose rental terms changed while `price_checked_on` did not:
    a new price must carry the date it was checked."""
    out = []
    for key, row in new.items():
        before = old.get(key)
        if before is None or all(row.get(f) == before.get(f) for f in PRICE_FIELDS):
            continue
        if row.get("price_checked_on") == before.get("price_checked_on"):
            out.append({"key": list(key), "date": row.get("price_checked_on") or ""})
    return out


def plan_changes(new: dict[tuple, dict[str, str]], old: dict[tuple, dict[str, str]]) -> list[dict]:
    """Jobs (model, method) whose recommended server (rank 1 of recommendations) changed between builds."""

    def first(rows: dict) -> dict[tuple, str]:
        return {
            (r["model_id"], r["method_id"]): r["server_id"] if r["recommended"] == "true" else ""
            for r in rows.values()
            if r["rank"] == "1"
        }

    now, before = first(new), first(old)
    return [
        {"key": list(job), "old": before[job], "new": server}
        for job, server in sorted(now.items())
        if job in before and before[job] != server
    ]


def flipped_verdicts(new_out: Path, old_out: Path, servers: dict[tuple, dict[str, str]]) -> list[dict]:
    """Seed 000's offers whose verdict (same server or not) the edits flipped (pipeline/verdicts.py);
    `servers`: the new build's servers.csv rows, for the servers' names."""
    names = {row["server_id"]: row["display_name"] for row in servers.values()}
    before, now = (verdicts.read_verdicts(out / "site" / "data") for out in (old_out, new_out))
    return [
        {"offer_id": f["offer_id"], "old": f["was"]["same"], "new": f["same"], "text": verdicts.flip_text(f, names)}
        for f in verdicts.flipped(before, now or {})
    ]


def diff(new_out: Path, old_out: Path) -> dict:
    """Everything that differs between two output folders (new build, published build)."""
    sources = [t for t in ALL_TABLES if t.kind == "source"]  # a catalog's few thousand rows at most
    new_tables = {t.name: read_table(new_out, t) for t in sources}
    old_tables = {t.name: read_table(old_out, t) for t in sources}
    names = Names(new_tables, old_tables)
    report: dict = {"new": str(new_out), "old": str(old_out), "values": [], "added": [], "removed": [], "derived": []}
    with table_changes.connection() as con:
        for table in ALL_TABLES:
            if table.kind == "source":
                found = compare_table(table, new_tables[table.name] or {}, old_tables[table.name] or {}, names)
                for part in ("values", "added", "removed"):
                    report[part] += found[part]
                continue
            counted = summarise_derived(con, table, new_out, old_out)
            if counted["changed"] or counted["added"] or counted["removed"]:
                report["derived"].append({"table": table.name, **counted})
        ranked = [_table_files(out, TABLES_BY_NAME["recommendations"]) for out in (new_out, old_out)]
        parquet = parquet_in_both(*ranked)
        plans = plan_changes(first_ranked(con, ranked[0], parquet), first_ranked(con, ranked[1], parquet))
    # Warnings an editor must act on: a price changed without a newer check date; the plan of a job changed.
    servers = (new_tables["servers"] or {}, old_tables["servers"] or {})
    report["warnings"] = [
        {
            **w,
            "text": message(
                "diff.stale_price", server=names.entity(TABLES_BY_NAME["servers"], tuple(w["key"])), date=w["date"]
            ),
        }
        for w in stale_prices(*servers)
    ] + flipped_verdicts(new_out, old_out, servers[0])  # and the seed-000 verdicts the edits flipped
    report["plans"] = [
        {
            **p,
            "text": message(
                "diff.plan_changed",
                model=names.names.get(("models", p["key"][0]), p["key"][0]),
                method=p["key"][1],
                old=p["old"] or "—",
                new=p["new"] or "—",
            ),
        }
        for p in plans
    ]
    site = compare_files(new_out / "site", old_out / "site")
    report["markdown"] = compare_files(new_out / "markdown", old_out / "markdown")
    report["pages"] = {part: [p for p in paths if p.endswith(".html")] for part, paths in site.items()}
    report["downloads"] = {part: [p for p in paths if p.startswith("data/")] for part, paths in site.items()}
    report["other"] = {
        part: [p for p in paths if not p.endswith(".html") and not p.startswith("data/")]
        for part, paths in site.items()
    }
    report["changed"] = any(report[part] for part in ("values", "added", "removed", "derived")) or any(
        paths for part in ("pages", "downloads", "markdown", "other") for paths in report[part].values()
    )
    return report


def format_text(report: dict) -> str:
    """The report for an editor, in Russian."""
    lines = [message("diff.title", new=report["new"], old=report["old"])]
    if not report["changed"]:
        return "\n".join([*lines, message("diff.nothing")])
    for part in ("values", "added", "removed"):
        if report[part]:
            lines += ["", f"{message(PARTS[part])} ({len(report[part])}):"] + [
                f"  {item['text']}" for item in report[part]
            ]
    for part, title in (("warnings", message("diff.warnings")), ("plans", message("diff.plans"))):
        if report.get(part):
            lines += ["", f"{title} ({len(report[part])}):"] + [f"  {i['text']}" for i in report[part]]
    if report["derived"]:
        lines += ["", f"{message('diff.derived')}:"]
        for item in report["derived"]:
            table = TABLES_BY_NAME[item["table"]]
            parts = ("changed", "added", "removed")
            line = f"{table.title_ru}: " + ", ".join(
                message(DERIVED[part], n=item[part]) for part in parts if item[part]
            )
            if item["columns"]:
                line += message(
                    "diff.derived_columns", columns=", ".join(label(table.field(c)) for c in item["columns"])
                )
            lines.append(f"  {line}")
    for part in ("pages", "downloads", "markdown", "other"):
        files = report[part]
        shown = (
            files["changed"]
            + [p + message("diff.new_file") for p in files["added"]]
            + [p + message("diff.gone_file") for p in files["removed"]]
        )
        if shown:
            lines += ["", f"{message(PARTS[part])} ({len(shown)}):"] + [f"  {p}" for p in shown]
    return "\n".join(lines)


def _encodable(text: str, stream) -> bool:
    try:
        text.encode(stream.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _print(text: str, stream=None) -> None:
    """`text` on the stream, in its encoding; what it cannot show becomes \\u escapes, never an error."""
    stream = stream or sys.stdout
    if hasattr(stream, "reconfigure") and not _encodable(text, stream):
        stream.reconfigure(errors="backslashreplace")
    try:
        print(text, file=stream)
        stream.flush()
    except BrokenPipeError:  # the reader stopped early (`diff | head`): the rest goes nowhere, quietly
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


def run(out: Path, against: Path, as_json: bool = False) -> int:
    """`python -m pipeline diff`: print the report; exit code 0 no change, 4 changes, 3 cannot compare."""
    for path, hint in ((out, "out"), (against, "against")):
        for folder in (path / "site", path / "site" / "data"):  # a build has both
            if not folder.is_dir():
                _print(message("diff.missing", path=folder, hint=message(HINTS[hint])), sys.stderr)
                return EXIT_ERROR
    import duckdb  # the DuckDB files are compared by their tables

    try:
        report = diff(out, against)
    except (OSError, ValueError, LookupError, TypeError, ArithmeticError, csv.Error, duckdb.Error) as exc:
        error = f"{type(exc).__name__}: {exc}"
        _print(message("diff.unreadable", out=out, against=against, error=error), sys.stderr)
        return EXIT_ERROR
    if as_json:
        text = json.dumps(report, ensure_ascii=False, indent=1)
        if not _encodable(text, sys.stdout):
            text = json.dumps(report, ensure_ascii=True, indent=1)  # the same JSON, in ASCII
    else:
        text = format_text(report)
    if not _encodable(text, sys.stdout):
        # Shown only where Cyrillic cannot be shown, so in Latin letters (and not from the Russian catalogue).
        print(
            f"diff: the terminal's encoding ({sys.stdout.encoding}) has no Cyrillic letters; they are shown "
            "as \\u escapes. For the text itself, use a UTF-8 locale (LANG=C.UTF-8) or PYTHONIOENCODING=utf-8.",
            file=sys.stderr,
        )
    _print(text)
    return EXIT_CHANGED if report["changed"] else EXIT_SAME
