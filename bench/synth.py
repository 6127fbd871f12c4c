"""Synthetic source folders of a chosen size, valid against pipeline/schema.py.

Every table of sources/ is copied as it is (methods, anchors, constants, references, GPUs,
legacy tables); models.csv and servers.csv keep their real rows and get synthetic ones
appended, so that server_fit (models x methods x servers) reaches the size asked for.

    python bench/synth.py OUT_DIR --rows 1000000        # server_fit of about 10^6 rows
    python bench/synth.py OUT_DIR --models 40 --servers 15
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCES = REPO / "sources"

# The server interconnect a GPU of each form factor can have (schema.SERVER_INTERCONNECTS).
SERVER_INTERCONNECT = {"sxm": "nvswitch", "oam": "infinity-fabric", "pcie": "pcie"}
GPU_COUNTS = (1, 2, 4, 8, 16)


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def write_csv(path: Path, header: list[str], rows: list[dict[str, str]]) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8", newline="")


def shape(rows: int, methods: int, real_models: int = 0, real_servers: int = 0) -> tuple[int, int]:
    """(models, servers) for a server_fit of about `rows` rows: as many models as servers."""
    pairs = max(rows / methods, 1)
    servers = max(round(math.sqrt(pairs)), real_servers)
    models = max(round(pairs / servers), real_models)
    return models, servers


def _decimal(x: float) -> str:
    """A float as the schema's text form (digits, optional dot; no exponent)."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


def synthetic_model(i: int, n: int) -> dict[str, str]:
    # Sizes spread log-uniformly over 0.5B..1000B: below, between and above the anchors.
    params_b = 0.5 * 2000 ** ((i % 997) / 996) if n > 1 else 7.0
    named = i % 2 == 1
    moe = i % 5 == 0
    return {
        "model_id": f"synth-model-{i}",
        "display_name": f"Синтетическая модель {i}",
        "short_name": f"Синт. {i}",
        "family": f"Синтетическое семейство {i % 20}",
        "kind": "named" if named else "generic",
        "params_b": _decimal(max(params_b, 0.01)),
        "active_params_b": _decimal(max(params_b / 8, 0.01)) if moe else "",
        "licence": "Apache 2.0" if named else "",
        "reference_id": "site-rules",
    }


def synthetic_server(i: int, gpu: dict[str, str], checked_on: str, reference_id: str) -> dict[str, str]:
    count = GPU_COUNTS[i % len(GPU_COUNTS)]
    memory_gb = float(gpu["memory_gb"]) * count
    return {
        "server_id": f"synth-server-{i}",
        "display_name": f"{count} × {gpu['short_name']} (синтетический {i})",
        "platform": "Синтетическая платформа",
        "gpu_id": gpu["gpu_id"],
        "gpu_count": str(count),
        "interconnect": SERVER_INTERCONNECT[gpu["form_factor"]],
        "price_rub_month": str(round(memory_gb * 2500) + (i % 1000) * 100),
        "price_checked_on": checked_on,
        "reference_id": reference_id,
    }


def generate(out: Path, models: int, servers: int, sources: Path = SOURCES) -> dict[str, int]:
    """Write a complete source folder to `out`; returns the row counts the pipeline will derive.

    `models` and `servers` are totals, the real rows included (at least the real counts).
    """
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(sources.glob("*.csv")):
        shutil.copyfile(path, out / path.name)
    _, methods = read_csv(sources / "methods.csv")
    _, gpus = read_csv(sources / "gpus.csv")

    model_header, model_rows = read_csv(sources / "models.csv")
    extra = max(models - len(model_rows), 0)
    model_rows += [synthetic_model(i, extra) for i in range(1, extra + 1)]
    write_csv(out / "models.csv", model_header, model_rows)

    server_header, server_rows = read_csv(sources / "servers.csv")
    priced = [r for r in server_rows if r["price_checked_on"]]
    checked_on = max(r["price_checked_on"] for r in priced) if priced else ""
    reference_id = server_rows[0]["reference_id"]
    extra = max(servers - len(server_rows), 0)
    server_rows += [synthetic_server(i, gpus[i % len(gpus)], checked_on, reference_id) for i in range(1, extra + 1)]
    write_csv(out / "servers.csv", server_header, server_rows)

    n_models, n_methods, n_gpus, n_servers = len(model_rows), len(methods), len(gpus), len(server_rows)
    return {
        "models": n_models,
        "methods": n_methods,
        "gpus": n_gpus,
        "servers": n_servers,
        "estimates": n_models * n_methods,
        "gpu_fit": n_models * n_methods * n_gpus,
        "server_fit": n_models * n_methods * n_servers,
    }


def generate_rows(out: Path, rows: int, sources: Path = SOURCES) -> dict[str, int]:
    """A folder whose server_fit has about `rows` rows."""
    _, methods = read_csv(sources / "methods.csv")
    _, models = read_csv(sources / "models.csv")
    _, servers = read_csv(sources / "servers.csv")
    n_models, n_servers = shape(rows, len(methods), len(models), len(servers))
    return generate(out, n_models, n_servers, sources)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write a synthetic source folder valid against the schema.")
    parser.add_argument("out", type=Path, help="folder to write the CSV files to")
    parser.add_argument("--rows", type=int, help="aim for a server_fit of about this many rows")
    parser.add_argument("--models", type=int, help="total models (real ones included)")
    parser.add_argument("--servers", type=int, help="total servers (real ones included)")
    parser.add_argument("--sources", type=Path, default=SOURCES, help="real sources to start from")
    args = parser.parse_args(argv)
    if args.rows is not None:
        counts = generate_rows(args.out, args.rows, args.sources)
    elif args.models is not None and args.servers is not None:
        counts = generate(args.out, args.models, args.servers, args.sources)
    else:
        parser.error("give --rows, or --models and --servers")
    print(", ".join(f"{k} {v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
