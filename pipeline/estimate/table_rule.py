"""Stage 3, estimation: the rules of docs/rules.md as pure functions over polars frames.

Frames in, frames out; no I/O, no globals. Numbers stay unrounded; rounding
happens only when they are shown.
"""

from __future__ import annotations

import polars as pl

# An interpolated 630 GB can be 630.0000000000001, and 1.5 x that / 94.5 is then
# 10.000000000000002. A relative tolerance keeps exact cases exact: the ratio is
# shrunk by one part in 10^9 before ceil, so "fits in k cards" means M <= k x G
# up to that tolerance whatever the scale. Every count and every fit status goes
# through this one function, so the tables never disagree at a boundary.
RELATIVE_TOLERANCE = 1e-9


def ceil_div(numerator: pl.Expr, denominator: pl.Expr) -> pl.Expr:
    """ceil(numerator / denominator) as an integer, robust to float noise; a job takes at least one."""
    ratio = numerator / denominator
    return (ratio * (1 - RELATIVE_TOLERANCE)).ceil().clip(lower_bound=1).cast(pl.Int64)


def _basis(p: pl.Expr, lo_b: pl.Expr, hi_b: pl.Expr, near: float) -> pl.Expr:
    """Where the size lies among the anchors. A size within `near` (anchor_size_tolerance) of the
    smallest or largest anchor is that anchor's (its memory still scales with it): 70,6 B beside a
    70 B anchor is no extrapolation."""
    return (
        pl.when(lo_b.is_null() & (p < hi_b * (1 - near)))
        .then(pl.lit("below_range"))
        .when(hi_b.is_null() & (p > lo_b * (1 + near)))
        .then(pl.lit("extrapolated"))
        .when(lo_b.is_null() | hi_b.is_null() | (lo_b == hi_b))
        .then(pl.lit("anchor"))
        .otherwise(pl.lit("interpolated"))
    )


def _bracketing_anchors(models: pl.DataFrame, methods: pl.DataFrame, memory_anchors: pl.DataFrame) -> pl.DataFrame:
    """Every model x method with the anchors around its size: the nearest at or below (anchor_b,
    anchor_gb) and at or above (upper_b, upper_gb), null where there is none."""
    anchors = memory_anchors.select(
        "method_id",
        pl.col("params_b").cast(pl.Float64).alias("anchor_b"),
        pl.col("memory_gb").cast(pl.Float64).alias("anchor_gb"),
    ).sort("anchor_b")
    jobs = (
        models.select("model_id", pl.col("params_b").cast(pl.Float64))
        .join(methods.select("method_id", "theoretical_min_applies"), how="cross")
        .sort("params_b")
    )
    lower = jobs.join_asof(
        anchors, left_on="params_b", right_on="anchor_b", by="method_id", strategy="backward", check_sortedness=False
    )
    return lower.join_asof(
        anchors.rename({"anchor_b": "upper_b", "anchor_gb": "upper_gb"}),
        left_on="params_b",
        right_on="upper_b",
        by="method_id",
        strategy="forward",
        check_sortedness=False,
    )


def _interpolated(p: pl.Expr, lo_b: pl.Expr, lo_gb: pl.Expr, hi_b: pl.Expr, hi_gb: pl.Expr) -> pl.Expr:
    """The memory at size `p` from the anchors around it: linear between them, proportional to the one
    there is below the smallest or above the largest."""
    return (
        pl.when(lo_b.is_null())
        .then(hi_gb * p / hi_b)
        .when(hi_b.is_null())
        .then(lo_gb * p / lo_b)
        .when(lo_b == hi_b)
        .then(lo_gb)
        .otherwise(lo_gb + (hi_gb - lo_gb) * (p - lo_b) / (hi_b - lo_b))
    )


def estimate_memory(
    models: pl.DataFrame,
    methods: pl.DataFrame,
    memory_anchors: pl.DataFrame,
    constants: dict[str, float],
) -> pl.DataFrame:
    """Rules 1-4: memory estimate, range and theoretical minimum for every model x method.

    Between two anchor sizes the estimate is linear; below the smallest it is
    proportional to the smallest, above the largest proportional to the largest
    (and flagged as extrapolation), except within anchor_size_tolerance of that anchor.
    """
    both = _bracketing_anchors(models, methods, memory_anchors)
    p, lo_b, lo_gb, hi_b, hi_gb = (pl.col(c) for c in ("params_b", "anchor_b", "anchor_gb", "upper_b", "upper_gb"))
    memory = _interpolated(p, lo_b, lo_gb, hi_b, hi_gb)
    basis = _basis(p, lo_b, hi_b, constants["anchor_size_tolerance"])
    min_bytes = constants["adamw_weight_bytes"] + constants["adamw_grad_bytes"] + constants["adamw_optimizer_bytes"]
    return (
        both.with_columns(memory_gb=memory, basis=basis)
        .with_columns(
            memory_low_gb=pl.col("memory_gb") * constants["range_low_factor"],
            memory_high_gb=pl.col("memory_gb") * constants["range_high_factor"],
            theoretical_min_gb=pl.when(pl.col("theoretical_min_applies")).then(p * min_bytes),
            extrapolated=pl.col("basis") == "extrapolated",
        )
        .select(
            "model_id",
            "params_b",
            "method_id",
            "memory_gb",
            "memory_low_gb",
            "memory_high_gb",
            "theoretical_min_gb",
            "basis",
            "extrapolated",
        )
        .sort("model_id", "method_id")
    )


def nvlink_need(
    cards: pl.Expr, cards_high: pl.Expr, has_nvlink: pl.Expr | None = None, other_link: pl.Expr | None = None
) -> pl.Expr:
    """Rule 7: one card even at +50 % -> no; one at the estimate only -> recommended; more -> required.
    Rule 10: a card without NVLink that needs more than one card -> pcie_only, never required; a card with
    its own direct link instead of NVLink (AMD's Infinity Fabric, `other_link`) -> other_link."""
    pcie_only = pl.lit(False) if has_nvlink is None else has_nvlink.not_()
    other = pl.lit(False) if other_link is None else other_link
    return (
        pl.when(other & (cards_high >= 2))
        .then(pl.lit("other_link"))
        .when(pcie_only & (cards_high >= 2))
        .then(pl.lit("pcie_only"))
        .when(cards >= 2)
        .then(pl.lit("required"))
        .when(cards_high >= 2)
        .then(pl.lit("recommended"))
        .otherwise(pl.lit("no"))
    )


# Card links (gpus.interconnect) that are NVLink, an SXM board or a bridge.
NVLINK_CARDS = ("nvlink", "nvlink-bridge")


def gpu_fit(estimates: pl.DataFrame, gpus: pl.DataFrame) -> pl.DataFrame:
    """Rule 5 and 7: cards of each GPU at the estimate and at +50 %, and the NVLink need."""
    return (
        estimates.select("model_id", "method_id", "memory_gb", "memory_high_gb")
        .join(
            gpus.select(
                "gpu_id",
                pl.col("memory_gb").alias("gpu_memory_gb"),
                # a frame without the column (a test's two-column catalog) keeps rule 7 as it is
                pl.col("interconnect").is_in(NVLINK_CARDS).alias("link")
                if "interconnect" in gpus.columns
                else pl.lit(True).alias("link"),
                (pl.col("interconnect") == "infinity-fabric").alias("other_link")
                if "interconnect" in gpus.columns
                else pl.lit(False).alias("other_link"),
            ),
            how="cross",
        )
        .with_columns(
            cards=ceil_div(pl.col("memory_gb"), pl.col("gpu_memory_gb")),
            cards_high=ceil_div(pl.col("memory_high_gb"), pl.col("gpu_memory_gb")),
        )
        .with_columns(
            nvlink_need=nvlink_need(pl.col("cards"), pl.col("cards_high"), pl.col("link"), pl.col("other_link"))
        )
        .select(
            "model_id",
            "method_id",
            "gpu_id",
            "gpu_memory_gb",
            "memory_gb",
            "memory_high_gb",
            "cards",
            "cards_high",
            "nvlink_need",
        )
        .sort("model_id", "method_id", "gpu_id")
    )


def server_memory(servers: pl.DataFrame, gpus: pl.DataFrame) -> pl.DataFrame:
    """Servers with their total GPU memory: count x memory of one card."""
    return servers.join(gpus.select("gpu_id", pl.col("memory_gb").alias("gpu_memory_gb")), on="gpu_id").with_columns(
        server_memory_gb=pl.col("gpu_count") * pl.col("gpu_memory_gb")
    )


# The rows of one piece of server_fit that ServerFit.chunks gives (whole jobs: a piece holds every
# server of each of its jobs, at least one job).
CHUNK_ROWS = 1 << 18
JOBS_KEPT = 16  # ServerFit.job keeps the rows of the last jobs asked for (each one row per server)


class ServerFit:
    """Rule 6, `server_fit`: does each job (an `estimates` row) fit each server, and how many such
    servers it takes. The table is the cross join of the jobs and the servers, both in key order, so
    its rows are in key order (model, method, server) and row j x S + s is job j on server s (S
    servers). It is never held whole: at 10^7 rows it was 1 GB of the build's memory, while a page
    reads one model's or one server's rows and a download is written piece by piece (`chunks`).
    The build keeps this object (Catalog.fits); `frame` makes rows when asked."""

    COLUMNS = (
        "model_id",
        "method_id",
        "server_id",
        "server_memory_gb",
        "memory_gb",
        "memory_high_gb",
        "fit",
        "servers_needed",
        "servers_needed_high",
        "price_rub_month",
    )

    def __init__(self, estimates: pl.DataFrame, servers: pl.DataFrame, gpus: pl.DataFrame):
        # Both sides sorted and the cross join keeping their order give the rows already in key
        # order: sorting ten million rows on three text keys was most of the time at scale.
        self.jobs = estimates.select("model_id", "method_id", "memory_gb", "memory_high_gb").sort(
            "model_id", "method_id"
        )
        self.servers = (
            server_memory(servers, gpus).select("server_id", "server_memory_gb", "price_rub_month").sort("server_id")
        )
        self.height = self.jobs.height * self.servers.height
        self._jobs: dict[int, pl.DataFrame] = {}  # job(): the last JOBS_KEPT jobs' rows

    def frame(self, start: int = 0, stop: int | None = None) -> pl.DataFrame:
        """The rows of jobs start..stop (every job by default), in key order."""
        jobs = self.jobs.slice(start, (self.jobs.height if stop is None else stop) - start)
        return (
            jobs.join(self.servers, how="cross", maintain_order="left_right")
            .with_columns(
                servers_needed=ceil_div(pl.col("memory_gb"), pl.col("server_memory_gb")),
                servers_needed_high=ceil_div(pl.col("memory_high_gb"), pl.col("server_memory_gb")),
            )
            .with_columns(
                # yes: S >= high; estimate_only: M <= S < high; no: S < M — read off the same counts.
                fit=pl.when(pl.col("servers_needed_high") == 1)
                .then(pl.lit("yes"))
                .when(pl.col("servers_needed") == 1)
                .then(pl.lit("estimate_only"))
                .otherwise(pl.lit("no"))
            )
            .select(self.COLUMNS)
        )

    def chunks(self, rows: int | None = None):
        """The table in pieces of whole jobs, about `rows` rows each (CHUNK_ROWS by default), in key
        order (one empty piece when the table has no rows)."""
        if self.height == 0:
            yield self.frame(0, 0)
            return
        step = max(1, (CHUNK_ROWS if rows is None else rows) // self.servers.height)
        for start in range(0, self.jobs.height, step):
            yield self.frame(start, start + step)

    def job(self, j: int) -> pl.DataFrame:
        """The rows of job j (one per server, in id order); the last few asked for are kept, as a table of
        servers x jobs asks for the same jobs on every server."""
        rows = self._jobs.pop(j, None)
        if rows is None:
            rows = self.frame(j, j + 1)
            if len(self._jobs) >= JOBS_KEPT:
                del self._jobs[next(iter(self._jobs))]
        self._jobs[j] = rows  # the last asked for is the last to go
        return rows

    def row(self, model_id: str, method_id: str, server_id: str) -> dict:
        """One row as a dict; KeyError when the table has none with these ids."""
        jobs = self.jobs.with_row_index().filter((pl.col("model_id") == model_id) & (pl.col("method_id") == method_id))
        server = self.servers.with_row_index().filter(pl.col("server_id") == server_id)
        if jobs.is_empty() or server.is_empty():
            raise KeyError((model_id, method_id, server_id))
        return self.job(jobs["index"][0]).row(server["index"][0], named=True)


def server_fit(estimates: pl.DataFrame, servers: pl.DataFrame, gpus: pl.DataFrame) -> pl.DataFrame:
    """Rule 6 as one frame (ServerFit, whose rows a build never holds whole)."""
    return ServerFit(estimates, servers, gpus).frame()
