"""The DuckDB file written in a process of its own, from the Parquet files a build has written.

`python -m pipeline.publish.database_process` reads a job (JSON on standard input: the file's path,
DuckDB's settings, each table's DDL, comments and Parquet file, the tables to drop, the build's
process id) and answers on standard output: nothing when the file is written, else a JSON object
naming DuckDB's error. It imports DuckDB alone. downloads.write_database starts it for a build that writes its downloads in a
thread while it renders: DuckDB's Python client takes the GIL after each task of a query (to check
for Ctrl-C), so in the build's process every task waited for the rendering to let go of it.
"""

from __future__ import annotations

import json
import sys


def write(job: dict) -> None:
    """The file as the job describes it, in one transaction (as downloads.write_database writes it)."""
    import duckdb

    con = duckdb.connect(job["path"], config=job["config"])
    con.execute("BEGIN TRANSACTION")
    for table in job["tables"]:
        name = table["name"]
        con.execute(f'DROP TABLE IF EXISTS "{name}"')
        con.execute(table["ddl"])
        con.execute(f'INSERT INTO "{name}" SELECT * FROM read_parquet(?)', [table["parquet"]])
        con.execute(table["comment"])
    for name in job["dropped"]:
        con.execute(f'DROP TABLE IF EXISTS "{name}"')
    con.execute("COMMIT")
    con.close()


def main() -> int:
    """Run the job on standard input; 1 (and DuckDB's error as JSON) when DuckDB refused it."""
    import duckdb

    from pipeline.parallel import die_with_parent

    job = json.load(sys.stdin)
    die_with_parent(job["parent"])  # Ctrl-C is the build's; killed when the build ends in any way
    try:
        write(job)
    except duckdb.Error as exc:
        answer = {"kind": type(exc).__name__, "io": isinstance(exc, duckdb.IOException), "text": str(exc)}
        json.dump(answer, sys.stdout)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
