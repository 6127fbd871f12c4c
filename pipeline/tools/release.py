"""`python -m pipeline release`: record a build as a numbered, dated release of the data.

The build in `--out` is compared with the published one (`--against`, the folder `just publish` keeps,
as `diff` compares them), each read as it describes itself: `site/data/datapackage.json` (tables,
columns, primary keys) and the CSV downloads. The version follows semantic versioning for the data
(`bump`): major when a table or a column was removed or renamed (a reader's query breaks), minor when
tables or columns were added, patch when only rows and values changed; nothing changed, no release.
The release and its changes are appended to `<sources>/releases/` (releases.csv, changes.csv), which
the next build publishes (pipeline/publish/releases.py): rebuild, then publish. The repository's
`CITATION.cff` (`--citation`) is rewritten for the latest release (also when nothing changed, so a new
title or author in site.toml reaches it).

`--against` may also be the last release itself, as publish stores it: its zip
(`data/releases/<version>/gpu-finetune-data-<version>.zip`) or that zip unpacked. That is the way out
when the published folder already holds data that were never released (published without `release`):
compared with it, nothing would have changed.

Changes of a source table are listed row by row and value by value; a derived table, whose rows follow
from the sources, is summed up in one line per kind of change (with the columns that changed), counted
by DuckDB a piece at a time from its Parquet files (its CSVs, as text, where a build has none;
pipeline/tools/table_changes.py): at 10^6 rows, reading both builds' tables into Python took 50 s and 8.7 GB.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.publish.releases import CHANGE_COLUMNS, CHANGES, FOLDER, RELEASE_COLUMNS, RELEASES, read_history
from pipeline.schema import TABLES_BY_NAME
from pipeline.tools import table_changes

EXIT_CODES = """exit codes:
  0  released (or nothing changed since the published build: no release)
  2  the release history in SOURCES/releases/ is malformed, or its last release is not published yet
  3  a build could not be read (build first; publish first for --against)
  64 a wrong command line"""

SCHEMA_MAJOR = ("table_removed", "column_removed")
SCHEMA_MINOR = ("table_added", "column_added")


@dataclass
class Snapshot:
    """One table of a build as published: its columns, primary key and rows (key -> column -> CSV text);
    a derived table (10^7 rows at scale) instead by its files, which compare counts with DuckDB
    (pipeline/tools/table_changes.py), never holding its rows."""

    columns: list[str]
    key: list[str]
    rows: dict[tuple, dict[str, str]] | None = None
    files: TableFiles | None = field(default=None, compare=False, repr=False)

    def count(self) -> int:
        """How many rows the table has (a derived table's counted by DuckDB once)."""
        if self.rows is not None:
            return len(self.rows)
        if self.files.rows is None:
            with table_changes.connection() as con:
                self.files.rows = table_changes.count_rows(con, self.files.relation(self.files.has_parquet))
        return self.files.rows


class DataFiles:
    """The data files of a build (names under site/data/): a build folder (`out`/site/data/), a data folder
    itself (with datapackage.json: a release unpacked), or a release's zip as publish stores it
    (data/releases/<version>/gpu-finetune-data-<version>.zip), whose members are read one at a time and,
    for DuckDB, copied a piece at a time to a temporary folder of this object's, removed with it."""

    def __init__(self, folder: Path | None = None, archive: Path | None = None, top: str = ""):
        self.folder, self.archive, self.top = folder, archive, top
        self.names = None
        if archive is not None:
            import zipfile

            with zipfile.ZipFile(archive) as zipped:
                self.names = {n.removeprefix(top) for n in zipped.namelist() if n.startswith(top)}
        self._temporary = None

    def exists(self, name: str) -> bool:
        return name in self.names if self.names is not None else (self.folder / name).is_file()

    def read(self, name: str) -> bytes:
        if self.archive is None:
            return (self.folder / name).read_bytes()
        import zipfile

        with zipfile.ZipFile(self.archive) as zipped:
            return zipped.read(self.top + name)

    def path(self, name: str) -> Path:
        """The file as a path DuckDB can read (a zip's member copied out once)."""
        if self.archive is None:
            return self.folder / name
        import shutil
        import tempfile
        import zipfile

        if self._temporary is None:
            self._temporary = tempfile.TemporaryDirectory(prefix="gpu-finetune-release-")
        path = Path(self._temporary.name) / name
        if not path.is_file():
            with (
                zipfile.ZipFile(self.archive) as zipped,
                zipped.open(self.top + name) as source,
                path.open("wb") as out,
            ):
                shutil.copyfileobj(source, out, 1 << 20)
        return path


class TableFiles:
    """A derived table's files in a build: its CSV and, where the build has one, its Parquet file (written
    from the same frame and read a column and a row group at a time); compare reads the Parquet files
    where both builds have them, else the CSVs, as text."""

    def __init__(self, data: DataFiles, name: str, csv_name: str):
        self.data, self.csv_name, self.parquet_name = data, csv_name, f"{name}.parquet"
        self.has_parquet = data.exists(self.parquet_name)
        self.rows: int | None = None  # the table's row count, once counted

    def relation(self, parquet: bool) -> str:
        if parquet:
            return table_changes.parquet_relation(self.data.path(self.parquet_name))
        return table_changes.csv_relation(self.data.path(self.csv_name))

    def present(self, parquet: bool) -> bool:
        """Whether the file relation(parquet) reads is there."""
        return self.has_parquet if parquet else self.data.exists(self.csv_name)


def parquet_in_both(new: TableFiles, old: TableFiles) -> bool:
    """Whether two builds' versions of a table are compared through their Parquet files (both have one),
    else through their CSVs, as text: the same result (tests/test_diff.py)."""
    return new.has_parquet and old.has_parquet


def data_reader(out: Path) -> DataFiles | None:
    """The data files of the build in `out` (DataFiles), or None when it holds none."""
    out = Path(out)
    if out.is_file() and out.suffix == ".zip":
        import zipfile

        with zipfile.ZipFile(out) as archive:
            names = archive.namelist()
        top = next(
            (n.removesuffix("datapackage.json") for n in names if n.rsplit("/", 1)[-1] == "datapackage.json"), None
        )
        return None if top is None else DataFiles(archive=out, top=top)
    for data in (out / "site" / "data", out):
        if (data / "datapackage.json").is_file():
            return DataFiles(folder=data)
    return None


def read_build(out: Path) -> dict[str, Snapshot]:
    """Every table of the build in `out` (its datapackage.json and CSV files; data_reader says where from):
    a source table's rows, a derived table's files; OSError/ValueError if unreadable."""
    data = data_reader(out)
    if data is None:
        raise FileNotFoundError(f"{out}: no site/data/datapackage.json, no datapackage.json, not a release zip")
    package = json.loads(data.read("datapackage.json").decode("utf-8"))
    tables = {}
    for resource in package["resources"]:
        columns = [f["name"] for f in resource["schema"]["fields"]]
        key = list(resource["schema"].get("primaryKey") or columns)
        if not detailed(resource["name"]):
            files = TableFiles(data, resource["name"], resource["path"])
            tables[resource["name"]] = Snapshot(columns, key, files=files)
            continue
        text = data.read(resource["path"]).decode("utf-8-sig")
        rows = {tuple(row[k] for k in key): row for row in csv.DictReader(io.StringIO(text, newline=""))}
        tables[resource["name"]] = Snapshot(columns, key, rows)
    return tables


def detailed(table: str) -> bool:
    """Whether a table's changes are listed one by one: a source table's (an unknown table's too)."""
    known = TABLES_BY_NAME.get(table)
    return known is None or known.kind == "source"


def compare(before: dict[str, Snapshot], after: dict[str, Snapshot]) -> list[dict]:
    """The changes from `before` to `after`, as rows of changes.csv without the version."""

    def change(table, kind, key="", column="", old="", new="", rows=1) -> dict:  # noqa: PLR0913 (a row's cells)
        return {
            "table_name": table,
            "change": kind,
            "row_key": key,
            "column_name": column,
            "old_value": old,
            "new_value": new,
            "rows": str(rows),
        }

    found = [change(t, "table_removed", rows=before[t].count()) for t in before if t not in after]
    found += [change(t, "table_added", rows=after[t].count()) for t in after if t not in before]
    for name in (t for t in after if t in before):
        old, new = before[name], after[name]
        found += [
            change(name, "column_removed", column=c, rows=old.count()) for c in old.columns if c not in new.columns
        ]
        found += [change(name, "column_added", column=c, rows=new.count()) for c in new.columns if c not in old.columns]
        if old.key != new.key:  # rows cannot be matched: the key itself changed, which is a removed column
            continue
        shared = [c for c in new.columns if c in old.columns and c not in new.key]
        if old.rows is None or new.rows is None:  # a derived table's files: counted by DuckDB
            parquet = parquet_in_both(new.files, old.files)
            with table_changes.connection() as con:
                counted = table_changes.count_changes(
                    con, new.files.relation(parquet), old.files.relation(parquet), new.key, shared
                )
            found += _summed_up(name, counted, change)
            continue
        added = [k for k in new.rows if k not in old.rows]
        removed = [k for k in old.rows if k not in new.rows]
        values = [
            (k, c, old.rows[k][c], new.rows[k][c])
            for k in new.rows
            if k in old.rows
            for c in shared
            if old.rows[k][c] != new.rows[k][c]
        ]
        if detailed(name):
            found += [change(name, "row_added", key="|".join(k)) for k in added]
            found += [change(name, "row_removed", key="|".join(k)) for k in removed]
            found += [change(name, "value_changed", "|".join(k), c, a, b) for k, c, a, b in values]
        else:
            counted = {
                "added": len(added),
                "removed": len(removed),
                "changed": len({v[0] for v in values}),
                "columns": [c for c in shared if any(v[1] == c for v in values)],
            }
            found += _summed_up(name, counted, change)
    return found


def _summed_up(name: str, counted: dict, change) -> list[dict]:
    """A derived table's changes, one line per kind (table_changes.count_changes' counts)."""
    found = []
    if counted["added"]:
        found.append(change(name, "row_added", rows=counted["added"]))
    if counted["removed"]:
        found.append(change(name, "row_removed", rows=counted["removed"]))
    if counted["changed"]:
        found.append(change(name, "rows_changed", column=" ".join(counted["columns"]), rows=counted["changed"]))
    return found


def bump(changes: list[dict]) -> str | None:
    """The part of the version a release with these changes raises: major, minor, patch, or None (no change)."""
    kinds = {c["change"] for c in changes}
    if kinds & set(SCHEMA_MAJOR):
        return "major"
    if kinds & set(SCHEMA_MINOR):
        return "minor"
    return "patch" if kinds else None


def next_version(previous: str | None, part: str) -> str:
    """The version after `previous` with `part` raised (the first release is 1.0.0)."""
    if previous is None:
        return "1.0.0"
    major, minor, patch = (int(n) for n in previous.split("."))
    if part == "major":
        return f"{major + 1}.0.0"
    if part == "minor":
        return f"{major}.{minor + 1}.0"
    return f"{major}.{minor}.{patch + 1}"


class Unpublished(Exception):
    """The history's last release is not the published one: publish it before the next release."""

    def __init__(self, recorded: str, published: str | None):
        super().__init__(
            f"release {recorded} is recorded but the published build is of {published or 'no release'}: "
            "build and publish it first (just build, just publish), then release what changed after it"
        )


def published_version(out: Path) -> str | None:
    """The release a build carries (its datapackage.json `version`), None for a build before releases."""
    return json.loads(data_reader(out).read("datapackage.json").decode("utf-8")).get("version")


def _append(path: Path, columns: tuple[str, ...], rows: list[dict]) -> None:
    new = not path.is_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        if new:
            writer.writeheader()
        writer.writerows(rows)


def release(sources: Path, out: Path, against: Path | None, released_on: dt.date) -> dict | None:
    """Compare `out` with `against` (None or absent: the first release) and append the release to the
    history in `sources`; returns the release (version, released_on, change, changes) or None when
    nothing changed since the last release."""
    history = read_history(sources)
    after = read_build(out)
    first = history.current is None
    published = against is not None and data_reader(against) is not None
    if published and not first:
        version = published_version(against)
        if version != history.current["version"]:
            raise Unpublished(history.current["version"], version)
    if published:
        changes = compare(read_build(against), after)
    else:
        changes = compare({}, after) if first else []
    part = "first" if first else bump(changes)
    if part is None:
        return None
    version = next_version(None if first else history.current["version"], part)
    row = {"version": version, "released_on": released_on.isoformat(), "change": part}
    _append(Path(sources) / FOLDER / RELEASES, RELEASE_COLUMNS, [row])
    _append(Path(sources) / FOLDER / CHANGES, CHANGE_COLUMNS, [{"version": version, **c} for c in changes])
    return {**row, "changes": changes}


def add_parser(commands, formatter, help_text: str) -> None:
    """`release`: its options."""
    import os

    p = commands.add_parser(
        "release",
        help=help_text,
        description="Record the build as a numbered, dated release of the data.\n\n" + __doc__.split("\n\n", 1)[1],
        epilog=EXIT_CODES,
        formatter_class=formatter,
    )
    p.add_argument("--out", type=Path, default=Path("output"), help="the build to release (default: output)")
    p.add_argument(
        "--against",
        type=Path,
        default=Path(os.environ.get("PUBLISHED_DIR", "published")),
        help="the published build (default: $PUBLISHED_DIR or published, made by `just publish`), or the "
        "last release's zip (data/releases/<version>/gpu-finetune-data-<version>.zip) or its unpacked folder",
    )
    p.add_argument("--sources", type=Path, default=Path("sources"), help="whose releases/ to append to")
    p.add_argument("--date", type=dt.date.fromisoformat, help="the release date YYYY-MM-DD (default: the build date)")
    p.add_argument(
        "--citation",
        type=Path,
        default=Path("CITATION.cff"),
        help="the repository's citation file, rewritten for the new release (default: CITATION.cff)",
    )
    p.add_argument(
        "--check-unreleased",
        action="store_true",
        help="record nothing; warn on stderr when --out carries the same version as --against but other data "
        "(changed without a release); `just publish` runs it before it copies the build",
    )


def unreleased(out: Path, against: Path) -> tuple[str | None, list[str]]:
    """(the version, the tables whose data differ) when the build in `out` carries the same release as the
    one in `against` but other data: changed since that release without a new one; (None, []) otherwise,
    also when either cannot be read (nothing published yet)."""
    try:
        version = published_version(out)
        if version is None or data_reader(against) is None or published_version(against) != version:
            return None, []
        changes = compare(read_build(against), read_build(out))
    except (OSError, ValueError, KeyError, TypeError, table_changes.duckdb_error()):
        return None, []
    return version, sorted({c["table_name"] for c in changes})


def run(args) -> int:
    """`python -m pipeline release`: the exit code."""
    from pipeline.fingerprint import build_date
    from pipeline.problems import DataError, format_report

    if args.check_unreleased:
        from pipeline.messages import message

        version, tables = unreleased(args.out, args.against)
        if tables:
            print(
                "publish: " + message("publish.unreleased", version=version, tables=", ".join(tables)), file=sys.stderr
            )
        return 0
    try:
        made = release(args.sources, args.out, args.against, args.date or build_date())
    except DataError as exc:
        print(format_report(exc.problems), file=sys.stderr)
        return 2
    except Unpublished as exc:
        print(f"release: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError, table_changes.duckdb_error()) as exc:  # a file DuckDB cannot read too
        print(f"release: cannot read the builds: {exc} (build first: python -m pipeline build)", file=sys.stderr)
        return 3
    write_citation(args.sources, args.citation)  # with or without a new release: never behind site.toml
    if made is None:
        print(f"release: nothing changed since {args.against}: no new release; {args.citation} names the latest")
        return 0
    print(
        f"release {made['version']} ({made['change']}) of {made['released_on']}: {len(made['changes'])} change(s) "
        f"recorded in {args.sources / FOLDER} and {args.citation}; build again, then publish"
    )
    return 0


def write_citation(sources: Path, path: Path) -> None:
    """The repository's CITATION.cff for the history's current release (releases.repository_citation)."""
    import tomllib

    from pipeline import TEMPLATES
    from pipeline.publish.releases import repository_citation

    config = tomllib.loads((TEMPLATES / "site.toml").read_text(encoding="utf-8"))
    text = repository_citation(read_history(sources), config)
    if text is not None:
        path.write_text(text, encoding="utf-8")
