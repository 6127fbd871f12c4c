"""Open the published DuckDB file with the oldest DuckDB the docs name and with the newest one, each a
separate tool in its own throwaway venv (uv), as an analyst's client would.

    python bench/duckdb_readers.py [output/site/data/gpu-finetune.duckdb]

Each reader counts every table's rows and reads the `gpus` table's comment; the counts must equal the
sidecars' `row_count` (site/data/<table>.metadata.json). Prints one line per reader; exit 0 when both
open it, 1 when one refuses it (its error is printed), 3 when a reader cannot be installed (no uv, no
registry). For CI (it downloads two DuckDB wheels), not for the test suite.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.publish.downloads import DATABASE_OLDEST_READER  # noqa: E402

# The oldest reader the docs promise (docs/analysts.md, the data page), and the newest release.
READERS = {"oldest": f"duckdb=={DATABASE_OLDEST_READER}", "newest": "duckdb"}

SCRIPT = """
import json, sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
tables = {n: con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for (n,) in con.execute("SHOW TABLES").fetchall()}
comment = con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'gpus'").fetchone()[0]
print(json.dumps({"version": duckdb.__version__, "tables": tables, "comment": comment}))
"""


def reader(requirement: str, folder: Path) -> Path:
    """A Python with exactly `requirement` installed (uv venv + uv pip install)."""
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv is None:
        raise OSError("uv is missing: pip install uv")
    venv = folder / requirement.replace("=", "_")
    subprocess.run([uv, "venv", "-q", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    subprocess.run([uv, "pip", "install", "-q", "--python", str(python), requirement], check=True, capture_output=True)
    return python


def expected_rows(database: Path) -> dict[str, int]:
    """Every table's row count, from the sidecars beside the file."""
    return {
        json.loads(p.read_text(encoding="utf-8"))["table"]: json.loads(p.read_text(encoding="utf-8"))["row_count"]
        for p in sorted(database.parent.glob("*.metadata.json"))
    }


def main(argv: list[str]) -> int:
    database = Path(argv[0] if argv else ROOT / "output" / "site" / "data" / "gpu-finetune.duckdb").resolve()
    rows = expected_rows(database)
    status = 0
    with tempfile.TemporaryDirectory(prefix="duckdb-readers-") as tmp:
        for role, requirement in READERS.items():
            try:
                python = reader(requirement, Path(tmp))
            except (OSError, subprocess.CalledProcessError) as exc:
                print(f"{role}: cannot install {requirement}: {exc}", file=sys.stderr)
                return 3
            done = subprocess.run([str(python), "-c", SCRIPT, str(database)], capture_output=True, text=True)
            if done.returncode != 0:
                print(f"{role} ({requirement}): refuses {database.name}: {done.stderr.strip()[-500:]}")
                status = 1
                continue
            seen = json.loads(done.stdout)
            same = seen["tables"] == rows and bool(seen["comment"])
            print(
                f"{role}: DuckDB {seen['version']} opens {database.name}: {len(seen['tables'])} tables, "
                + ("rows and comments as published" if same else f"rows differ: {seen['tables']} != {rows}")
            )
            status = status or (0 if same else 1)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
