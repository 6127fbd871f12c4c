"""The editor's tools at scale (`just bench --tools`, or `python bench/editor_tools.py`): what `diff`,
`release` and the release zip of `publish --to s3://` cost on a synthetic catalog, each a whole process
(wall, CPU with its children, the peak of the process tree's PSS: bench/whole.py's `measure`).

For each size (--sizes, default 1e6): bench/synth.py writes the catalog with the repository's release
history (sources/releases/, so the builds carry a version and `release` compares them), a forced build
makes the published folder, a copy of it is built again after one server's price changed (the
editor's build), and then: `diff` of the two, `release` of the second against the first (into a copy
of the sources' history), and the release zip written into a temporary file from the build's data
files. Reported, never asserted: the reference is the build itself, whose time and peak are printed
beside them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

import synth  # noqa: E402
import whole  # noqa: E402

ZIP = """
import json, sys, tempfile
from pathlib import Path
from pipeline.tools import publish_s3
site = Path(sys.argv[1]) / "site"
local = json.loads((site / "manifest.json").read_text())["files"]
with tempfile.TemporaryFile() as f:
    publish_s3.release_zip(site, local, "1.0.0", f)
    print(f.tell())
"""


def tools(b: whole.Bench, rows: int) -> dict:
    """The builds and the tools' figures for a catalog of about `rows` rows of server_fit."""
    folder = b.work / f"synth-{rows}"
    sources, published, edited = folder / "sources", folder / "published", folder / "output"
    counts = synth.generate_rows(sources, rows)
    shutil.copytree(b.repo / "sources" / "releases", sources / "releases", dirs_exist_ok=True)
    src = ["--sources", str(sources)]
    r = {"rows": counts.get("server_fit")}
    r["forced_build"] = b.run(["build", *src, "--out", str(published), "--force", "--quiet"], repeat=1)
    shutil.copytree(published, edited)
    new_price, _ = whole.price_editor(sources / "servers.csv")
    new_price(0)
    r["one_price_build"] = b.run(["build", *src, "--out", str(edited), "--quiet"], repeat=1, peak=False)
    r["rendered"] = whole.rendered(r["one_price_build"]["stdout"])  # (pages rendered anew, pages)
    r["database_bytes"] = [database_bytes(published), database_bytes(edited)]  # forced; after the edit
    r["diff"] = b.run(["diff", "--out", str(edited), "--against", str(published)], repeat=1)
    history = folder / "history"

    def fresh_history(_: int) -> None:
        shutil.rmtree(history, ignore_errors=True)
        shutil.copytree(b.repo / "sources" / "releases", history / "releases")

    release = ["release", "--out", str(edited), "--against", str(published), "--sources", str(history)]
    release += ["--citation", str(folder / "CITATION.cff"), "--date", "2026-12-07"]
    r["release"] = b.run(release, before=fresh_history, repeat=1)
    script = folder / "release_zip.py"
    script.write_text(ZIP, encoding="utf-8")
    r["release_zip"] = b.run([str(script), str(edited)], python=True, repeat=1)
    r["zip_bytes"] = int(r["release_zip"]["stdout"].strip() or 0)
    shutil.rmtree(folder, ignore_errors=True)
    return r


def database_bytes(out: Path) -> int | None:
    """The size of a build's DuckDB file (None when it has none): after one price edit a table made
    again once left the file twice a forced build's size (docs/operations.md, "Twenty-seventh round")."""
    path = out / "site" / "data" / "gpu-finetune.duckdb"
    return path.stat().st_size if path.is_file() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=HERE.parent, help="the checkout to measure (default: this one)")
    parser.add_argument("--sizes", default="1e6", help="synthetic catalogs, e.g. 1e5,1e6,1e7 (default: 1e6)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="gpu-bench-tools-"))
    try:
        b = whole.Bench(args.repo.resolve(), work, 1)
        runs = [tools(b, int(float(s))) for s in args.sizes.split(",") if s.strip()]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'server_fit rows':>16} {'command':<18} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9} {'exit':>5}")
    for r in runs:
        for name in ("forced_build", "one_price_build", "diff", "release", "release_zip"):
            m = r[name]
            print(f"{r['rows']:>16,} {name:<18} {m['wall']:>8.2f} {m['cpu']:>8.2f} {m['peak_mib']:>9.0f} {m['rc']:>5}")
        print(f"{'':>16} the release zip: {r['zip_bytes'] / 2**20:.0f} MiB; the one-price build rendered", end=" ")
        print("?" if r["rendered"] is None else f"{r['rendered'][0]} of {r['rendered'][1]} pages")
        forced, edited = (f"{n / 2**20:.0f} MiB" if n is not None else "?" for n in r["database_bytes"])
        print(f"{'':>16} the DuckDB file: {forced} forced, {edited} after the one-price build")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
