"""Releases of the data: the numbered, dated history an analyst cites.

`python -m pipeline release` (pipeline/tools/release.py) compares a build with the published one and
appends the release to `<sources>/releases/`: `releases.csv` (version, released_on, change: first,
major, minor or patch) and `changes.csv` (what changed, table by table). A build reads that history
(read_history) and publishes it: the version and release date in `datapackage.json`, `data/changelog.csv`
and `data/CITATION.cff`, the changelog page and the citation blocks ("how to cite") of the data page. Publishing
to object storage copies the release's data files to `data/releases/<version>/`, with one zip of them all
(zip_path), and keeps them as site.toml `[releases]` declares (retention). A catalog without a history (a
test's small catalog) has no version and no citation.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from dataclasses import dataclass
from pathlib import Path

from pipeline.messages import message
from pipeline.problems import DataError, Problem

FOLDER = "releases"
RELEASES = "releases.csv"
CHANGES = "changes.csv"
RELEASE_COLUMNS = ("version", "released_on", "change")
CHANGE_COLUMNS = ("version", "table_name", "change", "row_key", "column_name", "old_value", "new_value", "rows")
RELEASE_KINDS = ("first", "major", "minor", "patch")
# What one change row says; the first four are the schema's (they decide the version, see tools/release.py).
CHANGE_KINDS = (
    "table_removed",
    "column_removed",
    "table_added",
    "column_added",
    "row_added",
    "row_removed",
    "value_changed",
    "rows_changed",
)
RELEASES_DIR = "data/releases/"  # on the published site: data/releases/<version>/<file>
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")


@dataclass(frozen=True)
class History:
    """The releases (oldest first) and their changes, every value as the CSV's text."""

    releases: tuple[dict, ...] = ()
    changes: tuple[dict, ...] = ()

    @property
    def current(self) -> dict | None:
        return self.releases[-1] if self.releases else None

    def kept(self, retention: Retention) -> list[str]:
        """The versions whose files surely stay at data/releases/<version>/ (the newest `retention.releases`),
        newest first; an older one may stay too (`retention.days`), but a page does not promise it."""
        return [r["version"] for r in reversed(self.releases)][: retention.releases]


@dataclass(frozen=True)
class Retention:
    """How long a release's files stay at data/releases/<version>/ (site.toml `[releases]`): a release is
    deleted only once it is past the newest `releases` releases and was published more than `days` ago."""

    releases: int
    days: int


def retention(config: dict | None = None) -> Retention:
    """The retention a site config (site_templates/site.toml, parsed; None: read it) declares in `[releases]`;
    ValueError for a missing or bad value (the build reports it as a problem of site.toml)."""
    if config is None:
        import tomllib

        from pipeline import TEMPLATES

        config = tomllib.loads((TEMPLATES / "site.toml").read_text(encoding="utf-8"))
    section = config.get("releases")
    section = section if isinstance(section, dict) else {}
    values = [section.get("kept_releases"), section.get("kept_days")]
    if not all(type(v) is int and v >= 1 for v in values):
        raise ValueError(f"[releases] kept_releases, kept_days: {values}")
    return Retention(*values)


def zip_path(version: str) -> str:
    """Where a release's files are, zipped, on the published site (a stable URL, the version in its name)."""
    return f"{RELEASES_DIR}{version}/gpu-finetune-data-{version}.zip"


# Already compressed: stored as they are (deflating them again costs time and saves nothing).
STORED_SUFFIXES = (".parquet", ".xlsx", ".zip")


def zip_bytes(files: dict[str, bytes], version: str, released_on: str) -> bytes:
    """The release's zip (write_zip) of `files` (name under data/ -> content), in memory."""
    out = io.BytesIO()
    write_zip(out, {name: (lambda data=data: io.BytesIO(data)) for name, data in files.items()}, version, released_on)
    return out.getvalue()


def write_zip(target, files: dict, version: str, released_on: str) -> None:
    """Write the release's zip into the binary file `target`: `files` (name under data/ -> a function that
    opens it for reading) in a folder named as the zip, sorted, every entry dated on the release date, so
    the same release always gives the same bytes. Each file is copied a piece at a time (a 10^7-row
    catalog's data are 4.4 GB), into the same bytes as compressing it whole."""
    import shutil
    import zipfile

    folder = Path(zip_path(version)).stem
    stamp = dt.date.fromisoformat(released_on).timetuple()[:3] + (0, 0, 0)
    with zipfile.ZipFile(target, "w") as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(f"{folder}/{name}", date_time=stamp)
            info.external_attr = 0o644 << 16
            stored = name.endswith(STORED_SUFFIXES)
            info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            with files[name]() as source:
                size = source.seek(0, io.SEEK_END)  # over 2 GiB, an entry needs zip64 from its header on
                source.seek(0)
                with archive.open(info, "w", force_zip64=size > zipfile.ZIP64_LIMIT) as entry:
                    shutil.copyfileobj(source, entry, 1 << 20)


def _read(path: Path, columns: tuple[str, ...]) -> list[dict]:
    if not path.is_file():
        return []
    with path.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != columns:
            header = ",".join(reader.fieldnames or ())
            rule = message("release_history.columns", columns=", ".join(columns))
            raise DataError([Problem(f"{FOLDER}/{path.name}", 1, "", header, rule)])
        return [dict(row) for row in reader]


def read_history(sources: Path) -> History:
    """The release history under `sources`/releases/ (none: an empty History); DataError when it is malformed."""
    folder = Path(sources) / FOLDER
    releases = _read(folder / RELEASES, RELEASE_COLUMNS)
    changes = _read(folder / CHANGES, CHANGE_COLUMNS)
    problems, seen = [], set()
    where = f"{FOLDER}/{RELEASES}"
    for line, row in enumerate(releases, start=2):
        if not SEMVER.match(row["version"] or "") or row["version"] in seen:
            problems.append(Problem(where, line, "version", row["version"], message("release_history.version")))
        seen.add(row["version"])
        try:
            dt.date.fromisoformat(row["released_on"] or "")
        except ValueError:
            problems.append(Problem(where, line, "released_on", row["released_on"], message("release_history.date")))
        if row["change"] not in RELEASE_KINDS:
            rule = message("release_history.allowed", allowed=", ".join(RELEASE_KINDS))
            problems.append(Problem(where, line, "change", row["change"], rule))
    where = f"{FOLDER}/{CHANGES}"
    for line, row in enumerate(changes, start=2):
        if row["version"] not in seen:
            problems.append(Problem(where, line, "version", row["version"], message("release_history.unknown_version")))
        if row["change"] not in CHANGE_KINDS:
            rule = message("release_history.allowed", allowed=", ".join(CHANGE_KINDS))
            problems.append(Problem(where, line, "change", row["change"], rule))
    if problems:
        raise DataError(problems)
    return History(tuple(releases), tuple(changes))


def changelog_csv(history: History) -> bytes:
    """data/changelog.csv: every change of every release, newest release first, with its date (UTF-8 with BOM,
    like the other CSV downloads)."""
    dates = {r["version"]: r["released_on"] for r in history.releases}
    order = {r["version"]: i for i, r in enumerate(reversed(history.releases))}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["version", "released_on", *CHANGE_COLUMNS[1:]])
    for row in sorted(history.changes, key=lambda r: order[r["version"]]):  # stable: each release's own order
        cells = [row["version"], dates[row["version"]], *(row[c] for c in CHANGE_COLUMNS[1:])]
        writer.writerow(["'" + c if c.startswith(("=", "+", "-", "@", "\t", "\r")) else c for c in cells])
    return ("\ufeff" + out.getvalue()).encode("utf-8")


def citation(history: History, title: str, base_url: str, licence_id: str) -> dict | None:
    """What a citation names: title, version, date (ISO and Russian), the data's URL and the licence; None
    without a release."""
    release = history.current
    if release is None:
        return None
    base = base_url if base_url.endswith("/") else base_url + "/"
    return {
        "title": title,
        "version": release["version"],
        "released_on": release["released_on"],
        "url": f"{base}data/",
        "release_url": f"{base}data/releases/{release['version']}/",
        "licence": licence_id,
    }


def citation_cff(cite: dict, authors: str) -> str:
    """data/CITATION.cff (Citation File Format 1.2.0) for the current release."""

    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return "\n".join(
        [
            "cff-version: 1.2.0",
            "message: " + quoted(message("release_history.cff_message")),
            "type: dataset",
            "title: " + quoted(cite["title"]),
            "authors:",
            "  - name: " + quoted(authors),
            "version: " + quoted(cite["version"]),
            "date-released: " + quoted(cite["released_on"]),
            *(  # only a site built with an absolute --base-url has URLs to cite
                ["url: " + quoted(cite["release_url"]), "repository-artifact: " + quoted(cite["url"])]
                if cite["url"].startswith(("https://", "http://"))
                else []
            ),
            "license: " + cite["licence"],
            "",
        ]
    )


def repository_citation(history: History, config: dict) -> str | None:
    """The repository's own CITATION.cff (its root, where GitHub and Zenodo read it): the current release as
    `config` (site_templates/site.toml, parsed) names the data, without URLs (the site's address is the
    build's --base-url, not the repository's); None without a release. `release` writes it, a test checks it."""
    package = config["data_package"]
    cite = citation(history, package["title"], "/", config["data_licence"]["id"])
    return None if cite is None else citation_cff(cite, package["author"])
