"""The recommendation: for every model x method, every catalog server ranked (docs/rules.md, rule 11).

The first-principles estimator in the site's typical setup (sources/typical_setup.csv) finds the
fewest cards of each server's GPU the job fits on with headroom (`fits_with_headroom`: the upper end
of the range measured for that kind of setup — one card, or sharded — plus the declared reserve,
within the card's memory). A job then takes whole servers: all the cards of as many chassis as those
cards need, with the typical multi-GPU sharding over all of them, and its memory per card, time and
cost follow from that count. A job that fits one chassis only at the point estimate is a risk
(`tight`), never the recommendation; a job split across chassis needs a declared inter-node network
(servers.network), otherwise it is not recommended and has no total price. Time is the time model's
(step_time: compute on the active parameters at the measured efficiency, plus the communication compute
does not hide, over the server's interconnect and between servers its declared network), on the cards
the job uses, for the reference dataset of the typical setup, with the out-of-sample range of the
published runs (`lookups.time_band`); cost is that time under the server's declared rental
terms: an hourly price where the catalog has one, otherwise whole months of the monthly price, at
least the minimum term. Ranking: recommended first, then the cost, then the time.

Pure: frames and constants in, one frame out.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from functools import cached_property, partial

import numpy as np
import polars as pl

from pipeline import frame_memo, lookups
from pipeline.estimate import first_principles as memory
from pipeline.estimate import step_time, training
from pipeline.parallel import start_map
from pipeline.schema import RECOMMENDATIONS

# Why a row is or is not recommended (the `reason` column), in the order unrecommended rows rank.
REASONS = ("one_chassis", "several_chassis", "tight", "needs_network", "does_not_fit")
RECOMMENDED_REASONS = ("one_chassis", "several_chassis")

# The kinds of setup whose whole-card readings have their own measured range (estimator_range's scopes).
ONE_GPU, SHARDED = lookups.ONE_GPU, lookups.SHARDED
Spreads = Mapping[str, tuple[float, float]]


def setup_kind(cards: int) -> str:
    """The kind of setup whose measured range applies to a job on `cards` cards."""
    return SHARDED if cards > 1 else ONE_GPU


def reserve_gb(cards: int, c: Mapping[str, object]) -> float:
    """The declared reserve on top of the upper range: what NCCL keeps in a group of more than two cards
    beyond the buffers the estimate counts (nccl_buffers_large_group_gb - nccl_buffers_gb), none on one or two."""
    if cards <= 2:
        return 0.0
    return max(0.0, float(c["nccl_buffers_large_group_gb"]) - float(c["nccl_buffers_gb"]))


def upper_gb(per_gpu_gb: float, cards: int, spreads: Spreads) -> float:
    """The upper end of the measured range of a per-card figure on `cards` cards (the figure itself without one)."""
    spread = spreads.get(setup_kind(cards))
    return per_gpu_gb if spread is None else per_gpu_gb * spread[1]


def fits_with_headroom(per_gpu_gb: float, cards: int, gpu_memory_gb: float, spreads: Spreads, c) -> bool:
    """Headroom: the upper end of the measured range plus the reserve is within the card's memory."""
    return upper_gb(per_gpu_gb, cards, spreads) + reserve_gb(cards, c) <= gpu_memory_gb


def job_cards(  # noqa: PLR0913
    arch,
    setup: Callable[[int], memory.Setup],
    c: Mapping[str, object],
    gpu_memory_gb: float,
    total: Callable[[memory.Setup], float] | None = None,
    at: Callable[[int], memory.Setup] | None = None,
) -> int | None:
    """Fewest cards of `gpu_memory_gb` a typical setup fits on (`setup(cards)` gives it on that many
    cards: one plainly, more with the multi-GPU sharding), or None. `total` gives a setup's peak
    bytes per card (memory.estimate's total; jobs_by_signature passes one that remembers them per model and
    method, so the searches for a job's GPU sizes share their estimates); `at` as in fewest_cards."""
    total = total or (lambda s: memory.estimate(arch, s, c).total)
    if total(setup(1)) <= gpu_memory_gb * memory.GB:  # memory.fits
        return 1
    found = fewest_cards(total, setup(2), gpu_memory_gb, at=at)
    return None if found is None else max(found, 2)


def fewest_cards(
    total: Callable[[memory.Setup], float],
    setup: memory.Setup,
    gpu_memory_gb: float,
    limit: int | None = None,
    at: Callable[[int], memory.Setup] | None = None,
) -> int | None:
    """memory.min_gpus's binary search with the estimate given as `total` (a setup's peak bytes per card).
    `at(cards)` is `setup` on that many cards (by default made for each probe; a caller that searches
    often with one setup passes one that keeps them)."""
    limit = _MIN_GPUS_LIMIT if limit is None else limit
    at = at or (lambda cards: replace(setup, gpus=cards))

    def fits(cards: int) -> bool:
        return total(at(cards)) <= gpu_memory_gb * memory.GB

    if setup.sharding == "ddp":
        return 1 if fits(1) else None
    low, high = 1, limit
    if not fits(high):
        return None
    while low < high:
        mid = (low + high) // 2
        if fits(mid):
            high = mid
        else:
            low = mid + 1
    return low


_MIN_GPUS_LIMIT = inspect.signature(memory.min_gpus).parameters["limit"].default


# The cost rule lives with the other time and cost rules; recommend ranks by it.
rental_cost = training.rental_cost


def recommendations(*args, **kwargs) -> pl.DataFrame:
    """The `recommendations` table as one frame (rank_plans' arguments; a build keeps its Ranked)."""
    return rank_plans(*args, **kwargs).frame()


def rank_plans(  # noqa: PLR0913
    models: pl.DataFrame,
    methods: pl.DataFrame,
    servers: pl.DataFrame,
    gpus: pl.DataFrame,
    c: Mapping[str, object],
    spread: tuple[float, float] | Spreads | None = None,
    band: lookups.TimeBand | None = None,
    memo: frame_memo.FrameMemo | None = None,
) -> Ranked:
    """The `recommendations` table, one row per model x method x server ranked within model x method,
    held as its order (Ranked). `spread`: the factors of the first-principles estimate's measured range
    per kind of setup (`plan_spreads`), or one (low, high) pair for every kind; None: no measured range
    (the headroom is then the reserve alone). `band`: the time figures' measured range and coverage
    (`lookups.time_band`). `memo`: where the plans are remembered (they do not depend on the prices;
    `jobs_by_signature`).

    The estimator runs once per model x method x card count (`jobs_by_signature`); the rent is column arithmetic."""
    spreads = _spreads(spread)
    tokens = float(c["typical_dataset_tokens_m"]) * 1e6 * float(c["typical_epochs"])
    plans, carried = jobs_by_signature(models, methods, servers, gpus, c, tokens, spreads, band, memo)
    return Ranked(plans, carried, c, tokens)


class JobRows:
    """What a reader of `recommendations` asks of it besides its rows in order: its jobs (model x
    method, in key order, each a run of consecutive rows), the rows of one job, and `leading`, the rows
    the pages read (each job's rank-1 row and its best-ranked `tight` row). Subclasses give `height`,
    `frame`, `chunks`, `_span(a, b)` (rows a..b of the table) and `_at(positions)` (those rows, sorted)."""

    height: int
    jobs: pl.DataFrame  # model_id, method_id of each job, in the table's order
    offsets: np.ndarray  # the first row of each job, then the height

    def _set_jobs(self, job: pl.Series, tight: np.ndarray, jobs: pl.DataFrame) -> None:
        """`jobs`, `offsets` and the leading rows' positions from each row's job number in rank order (`job`,
        numbering `jobs`' rows) and whether its reason is tight (`tight`)."""
        first = (job != job.shift()).fill_null(True).to_numpy()
        starts = np.flatnonzero(first)
        self.jobs = jobs[pl.Series(job.to_numpy()[starts], dtype=pl.Int64)]
        self.offsets = np.append(starts, len(job)).astype(np.int64)
        risks = np.flatnonzero(tight)
        of_risk = np.searchsorted(self.offsets, risks, side="right") - 1
        firsts = risks[np.r_[True, of_risk[1:] != of_risk[:-1]]] if len(risks) else risks
        self._leading = np.union1d(starts, firsts).astype(np.int64)

    @cached_property
    def _job_numbers(self) -> dict[tuple[str, str], int]:
        return {key: j for j, key in enumerate(self.jobs.iter_rows())}

    @cached_property
    def leading(self) -> pl.DataFrame:
        """Each job's rank-1 row and its best-ranked `tight` row (fits one chassis only at the point
        estimate), in the table's order: what lookups.best, job_gpus and the pages' risks read."""
        return self._at(self._leading)

    def job(self, model_id: str, method_id: str) -> pl.DataFrame:
        """The rows of one job in rank order (none for a job the table does not have)."""
        j = self._job_numbers.get((model_id, method_id))
        if j is None:
            return self._span(0, 0)
        return self._span(int(self.offsets[j]), int(self.offsets[j + 1]))

    def _chunk_bounds(self, rows: int | None) -> list[tuple[int, int]]:
        """Row ranges of whole jobs, about `rows` rows each (PIECE_ROWS by default)."""
        step, bounds, start = PIECE_ROWS if rows is None else rows, [], 0
        while start < len(self.offsets) - 1:
            stop = int(np.searchsorted(self.offsets, self.offsets[start] + step, side="right")) - 1
            stop = max(start + 1, stop)
            bounds.append((int(self.offsets[start]), int(self.offsets[stop])))
            start = stop
        return bounds


class Whole(JobRows):
    """A `recommendations` frame held whole (read back from a download, or a test's) read as Ranked is."""

    def __init__(self, frame: pl.DataFrame) -> None:
        self._frame, self.height = frame, frame.height
        ids = frame.select("model_id", "method_id")
        jobs = ids.unique(maintain_order=True)
        job = ids.join(jobs.with_row_index("job"), on=["model_id", "method_id"], maintain_order="left")["job"]
        self._set_jobs(job, (frame["reason"] == "tight").to_numpy(), jobs)

    def frame(self) -> pl.DataFrame:
        return self._frame

    def chunks(self, rows: int | None = None) -> Iterator[pl.DataFrame]:
        yield self._frame

    def _span(self, a: int, b: int) -> pl.DataFrame:
        return self._frame.slice(a, b - a)

    def _at(self, positions: np.ndarray) -> pl.DataFrame:
        return self._frame[pl.Series(positions, dtype=pl.Int64)]


# A `recommendations` table of at most KEPT_ROWS rows is made once and kept whole (Ranked.frame); a larger
# one is made in pieces of about PIECE_ROWS rows: its 33 columns make a piece of 2^18 rows four times
# server_fit's, and the three writers that take pieces at once held 0.25 GB more at 10^6 rows.
KEPT_ROWS = 1 << 18
PIECE_ROWS = 1 << 16


class Ranked(JobRows):
    """Rule 11's `recommendations` table held as its order: the plans (one row per model x method x
    server signature), the servers with their prices, and, for every row in rank order, which plan and
    which server it is (two 32-bit numbers). Its rows are made when asked, in pieces of whole jobs
    (`chunks`), a job's (`job`), the rows the pages read (`leading`) or whole (`frame`; kept when it has at
    most KEPT_ROWS rows): at 10^7 rows the table held whole was 2.7 GB of a build's memory.

    The order is found on the few columns the rank reads (`_rank_keys`); a row is its plan's and its
    server's columns, priced (_priced_rows) and ranked among its job's rows (_with_rank): the same rows
    as ranking the whole joined table (`rank`'s one sort)."""

    def __init__(self, plans: pl.DataFrame, carried: pl.DataFrame, c: Mapping[str, object], tokens: float) -> None:
        self.c, self.tokens = c, tokens
        jobs = plans.select("model_id", "method_id").unique().sort("model_id", "method_id")
        servers = carried.sort("server_id")  # a server's row number then orders as its id
        self._plans = plans.select("model_id", "method_id", *PLAN_COLUMNS)
        self._servers = servers.select("server_id", *training.PRICE_COLUMNS)
        order = _order(
            plans.join(jobs.with_row_index("job"), on=["model_id", "method_id"], maintain_order="left"), servers, c
        )
        self.height = order.height
        self._set_jobs(order["job"], order["tight"].to_numpy(), jobs)
        self._order = order.select("plan_row", "server_row")
        self._whole: pl.DataFrame | None = None

    def frame(self) -> pl.DataFrame:
        """The whole table (made again on each call above KEPT_ROWS rows)."""
        if self._whole is not None:
            return self._whole
        # Its columns' chunks aligned: polars' to_arrow (the DuckDB file's thread, the workbook child's
        # table) would align them on a copy each time, and the Parquet file's row groups follow them.
        whole = self._made(self._order).rechunk()
        if self.height <= KEPT_ROWS:
            self._whole = whole
        return whole

    def chunks(self, rows: int | None = None) -> Iterator[pl.DataFrame]:
        """The table in pieces of whole jobs, about `rows` rows each (PIECE_ROWS by default), in rank
        order; one piece (the kept frame) when it has at most KEPT_ROWS rows (or `rows`), or none."""
        if self.height <= (KEPT_ROWS if rows is None else rows):
            yield self.frame()
            return
        for a, b in self._chunk_bounds(rows):
            yield self._span(a, b)

    def _span(self, a: int, b: int) -> pl.DataFrame:
        if self.height <= KEPT_ROWS:  # a slice of the kept frame: making a job's rows is a dozen queries
            return self.frame().slice(a, b - a)
        return self._made(self._order.slice(a, b - a))

    def _made(self, order: pl.DataFrame) -> pl.DataFrame:
        """The table's rows for `order` (plan_row, server_row), ranked as consecutive rows of their jobs."""
        plans = self._plans.select(pl.all().gather(order["plan_row"]))
        servers = self._servers.select(pl.all().gather(order["server_row"]))
        wide = pl.concat([plans, servers], how="horizontal").select(*JOB_SCHEMA, *training.PRICE_COLUMNS)
        frame = _priced_rows(wide.with_columns(tokens=pl.lit(self.tokens)), self.c)
        return _with_rank(frame).select(RECOMMENDATIONS.columns)

    def _at(self, positions: np.ndarray) -> pl.DataFrame:
        """The rows at `positions` (sorted, distinct), each made with its neighbours in its job (which
        tied_on_cost reads), its rank its distance from its job's first row."""
        if self.height <= KEPT_ROWS:
            return self.frame()[pl.Series(positions, dtype=pl.Int64)]
        job = np.searchsorted(self.offsets, positions, side="right") - 1
        low = np.maximum(positions - 1, self.offsets[job])
        high = np.minimum(positions + 2, self.offsets[job + 1])
        lengths = high - low
        before = np.repeat(np.cumsum(lengths) - lengths, lengths)
        rows = np.repeat(low, lengths) + np.arange(lengths.sum()) - before
        centre = rows == np.repeat(positions, lengths)
        made = self._made(self._order[pl.Series(rows, dtype=pl.Int64)])
        rank = pl.Series("rank", positions - self.offsets[job] + 1, dtype=pl.Int64)
        return made.filter(pl.Series(centre)).with_columns(rank)


def _order(plans: pl.DataFrame, servers: pl.DataFrame, c: Mapping[str, object]) -> pl.DataFrame:
    """Every row of the table in rank order (_rank_keys) as numbers: `job` (plans' job number, the jobs in
    key order), `plan_row`, `server_row` (`servers` in id order) and whether its reason is `tight`. Sorted
    on numbers only: on the ids' text it held 2.9 GB at 10^7 rows."""
    schema = RECOMMENDATIONS.polars_schema
    place = pl.when(pl.col("reason").is_in(RECOMMENDED_REASONS)).then(0)
    place = place.otherwise(
        pl.col("reason").replace_strict({r: i for i, r in enumerate(REASONS)}, return_dtype=pl.Int64)
    )
    narrow = (
        plans.select(
            "job",
            "signature",
            "servers_count",
            hours=pl.col("hours").cast(schema["hours"]),
            place=place.cast(pl.Int8),  # recommended first, then the risks in REASONS' order
            has_price=pl.col("reason").is_in(PRICED_REASONS),
            tight=pl.col("reason") == "tight",
        )
        .with_row_index("plan_row")
        .join(servers.select("signature", *training.PRICE_COLUMNS).with_row_index("server_row"), on="signature")
    )
    cost = pl.col("cost_rub")
    narrow = narrow.with_columns(cost_rub=priced(c, pl.col("has_price"))["cost_rub"].cast(schema["cost_rub"]))
    keys = ["job", "place", cost.is_null(), cost, "hours", "server_row"]
    return narrow.sort(keys, nulls_last=True).select("job", "plan_row", "server_row", "tight")


def _spreads(spread) -> dict[str, tuple[float, float]]:
    if spread is None:
        return {}
    if isinstance(spread, tuple):
        return dict.fromkeys((ONE_GPU, SHARDED), spread)
    return dict(spread)


# The reasons whose rows have a total price: a plan the site would run (recommended or a tight risk).
PRICED_REASONS = ("one_chassis", "several_chassis", "tight")


def priced(c: Mapping[str, object], has_price: pl.Expr | None = None) -> dict[str, pl.Expr]:
    """The rent (training.rental_terms) of a row of the jobs (jobs_by_signature) joined with the servers'
    prices: the hours on all the chassis' cards; none where the job does not fit or would span chassis
    without a network (no total price for a plan the site does not recommend: `has_price`, by default
    whether the row's reason is one of PRICED_REASONS)."""
    rent = training.rental_terms(pl.col("hours"), pl.col("servers_count"), c)
    has_price = pl.col("reason").is_in(PRICED_REASONS) if has_price is None else has_price
    return {name: pl.when(has_price).then(expr) for name, expr in rent.items()}


def place(count: int, point: int | None, headroom: int | None, network: bool, fits_all: bool) -> tuple[str, int | None]:
    """(reason, chassis) of a job on servers of `count` cards, given the fewest cards it fits on at the
    point estimate (`point`) and with headroom (`headroom`), whether a network joins chassis, and whether
    it fits with headroom on all the cards of the chassis it would take (`fits_all`)."""
    if point is None:
        return "does_not_fit", None
    chassis = None if headroom is None else -(-headroom // count)
    if chassis == 1 and fits_all:
        return "one_chassis", 1
    if chassis is not None and chassis > 1 and network:
        return "several_chassis", chassis
    if point <= count:
        return "tight", 1
    if chassis is None:
        return "does_not_fit", None
    return "needs_network", chassis


def jobs_by_signature(  # noqa: PLR0913
    models: pl.DataFrame,
    methods: pl.DataFrame,
    servers: pl.DataFrame,
    gpus: pl.DataFrame,
    c: Mapping[str, object],
    tokens: float,
    spreads: Spreads | None = None,
    band: lookups.TimeBand | None = None,
    memo: frame_memo.FrameMemo | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(plans, carried): the plans of every model x method (`plan_job`) in the typical setup on every server
    signature, and each server's signature with its prices (training.PRICE_COLUMNS); joined on
    `signature` they are the jobs, one row per model x method x catalog server (Ranked keeps their
    order).

    A plan depends on a server only through its `SIGNATURE` (card, card count, interconnect, network):
    each job is planned once per distinct signature, and the plans are joined to the servers that have
    it, so a catalog of many servers of a few configurations costs what those configurations cost.
    `memo` remembers those plans (pipeline.frame_memo) by everything they depend on, which is not the
    servers' ids or prices: a price edit reuses them."""
    method_ids = methods.sort("sort_order")["method_id"].to_list()
    of_server, kinds = by_signature(servers)

    def planned() -> pl.DataFrame:
        return plan_table(models, method_ids, kinds, gpus, c, tokens, spreads, band)

    parts = (
        frame_memo.frame_digest(models),
        repr(method_ids),
        repr(kinds),
        frame_memo.frame_digest(gpus),
        frame_memo.mapping_digest(c),
        repr(tokens),
        repr(sorted((spreads or {}).items())),
        _band_text(band),
    )
    plans = frame_memo.made_now("plans", parts, planned, memo)
    return plans, of_server.join(servers.select("server_id", *training.PRICE_COLUMNS), on="server_id")


def _band_text(band: lookups.TimeBand | None) -> str:
    """A TimeBand as text that is the same in every process (its sets sorted)."""
    if band is None:
        return "none"
    return repr((band.low, band.high, sorted(band.gpus), sorted(band.links), band.speed))


# Plans (models x methods x server signatures) from which the two cores share them (pipeline.parallel):
# 10^6 catalog rows are about 60,000 plans, 2.6 s of Python; the real catalog's 2,700 take 0.1 s.
PARALLEL_PLANS = 20_000


def plan_table(  # noqa: PLR0913
    models: pl.DataFrame,
    method_ids: list[str],
    kinds: list[tuple[int, dict]],
    gpus: pl.DataFrame,
    c: Mapping[str, object],
    tokens: float,
    spreads: Spreads | None,
    band: lookups.TimeBand | None,
) -> pl.DataFrame:
    """The plans of every model x method on every server signature of `kinds` (`plan_signatures`): one row
    each, with `signature` in place of the server. Planning is plain Python, a model at a time: a large
    catalog's models are shared with a forked child (pipeline.parallel.start_map; polars runs only here)."""
    archs = memory.model_architectures(models)
    setups: dict[tuple[str, int], memory.Setup] = {}  # the typical setup does not depend on the model

    def typical(method_id: str, cards: int) -> memory.Setup:
        if (method_id, cards) not in setups:
            setups[method_id, cards] = memory.typical_setup(method_id, c, cards)
        return setups[method_id, cards]

    rows_of_gpu = gpu_rows(gpus)
    # A method's sharded setup on n cards, shared by every model's card searches (each made once).
    sharded = {method_id: _on_cards(typical(method_id, 2)) for method_id in method_ids}

    def model_plans(model_id: str) -> list[tuple]:
        """One model's plans as rows: its id, the method id, the signature, the PLAN_COLUMNS' values."""
        return [
            (model_id, method_id, index, *[plan.get(name) for name in PLAN_COLUMNS])
            for method_id in method_ids
            for index, plan in plan_signatures(
                archs[model_id],
                partial(typical, method_id),
                kinds,
                rows_of_gpu,
                c,
                tokens,
                spreads,
                band,
                at=sharded[method_id],
            )
        ]

    ids = sorted(archs)
    if len(ids) * len(method_ids) * len(kinds) >= PARALLEL_PLANS:
        parts = start_map(model_plans, ids)()
    else:
        parts = [model_plans(model_id) for model_id in ids]
    # Made from rows by polars (a column at a time in Python took twice as long: 56,000 plans at 10^6 rows).
    schema = {"model_id": pl.String, "method_id": pl.String, "signature": pl.Int64}
    schema |= {name: JOB_SCHEMA[name] for name in PLAN_COLUMNS}
    frame = pl.DataFrame([row for part in parts for row in part], schema=schema, orient="row")
    return frame.select("signature", *(k for k in JOB_SCHEMA if k != "server_id"))


def gpu_rows(gpus: pl.DataFrame) -> dict[str, dict]:
    """Each card's row (a dict) by its id: what plan_signatures reads of the cards."""
    return {g["gpu_id"]: g for g in gpus.iter_rows(named=True)}


# The server fields a plan reads (gpu_id, gpu_count, interconnect, network): servers alike in them share plans.
SIGNATURE = ("gpu_id", "gpu_count", "interconnect", "network")


def by_signature(servers: pl.DataFrame) -> tuple[pl.DataFrame, list[tuple[int, dict]]]:
    """(server_id -> signature number, by server id; (number, a server's signature fields) for each distinct
    signature). A few hundred rows at most: plain Python."""
    numbers: dict[tuple, int] = {}
    ids, of_server = [], []
    for row in servers.select("server_id", *SIGNATURE).sort("server_id").iter_rows():
        ids.append(row[0])
        of_server.append(numbers.setdefault(row[1:], len(numbers)))
    frame = pl.DataFrame(
        {"server_id": ids, "signature": of_server}, schema={"server_id": pl.String, "signature": pl.Int64}
    )
    return frame, [(n, dict(zip(SIGNATURE, key, strict=True))) for key, n in numbers.items()]


def plan_job(  # noqa: PLR0913
    arch,
    setup: Callable[[int], memory.Setup],
    servers: pl.DataFrame,
    gpus: pl.DataFrame,
    c: Mapping[str, object],
    tokens: float,
    spreads: Spreads | None = None,
    band: lookups.TimeBand | None = None,
    share: float | None = None,
) -> list[dict]:
    """One job (`setup(cards)` gives it on that many cards) on every catalog server, by server id: where it
    goes (`place`), the cards it takes (all the cards of its chassis), the first-principles memory per card
    with its measured range, the headroom left, the link and the hours on those cards (`_time`); no FP8
    setup on a card without FP8. `share`: the reader's share of the BF16 peak instead of the measured
    efficiency."""
    of_server, kinds = by_signature(servers)
    plans = dict(plan_signatures(arch, setup, kinds, gpu_rows(gpus), c, tokens, spreads, band, share))
    return [
        {"server_id": server_id} | plans[index]
        for server_id, index in of_server.iter_rows()
        if index in plans  # an FP8 setup is not planned on a card without FP8
    ]


def plan_signatures(  # noqa: PLR0913
    arch,
    setup: Callable[[int], memory.Setup],
    kinds: list[tuple[int, dict]],
    gpus: Mapping[str, dict],
    c: Mapping[str, object],
    tokens: float,
    spreads: Spreads | None = None,
    band: lookups.TimeBand | None = None,
    share: float | None = None,
    at: Callable[[int], memory.Setup] | None = None,
) -> list[tuple[int, dict]]:
    """`plan_job`'s plan (without the server id) for each server signature of `kinds` (`by_signature`);
    `gpus`: each card's row by id (gpu_rows); `at(n)`: `setup(2)` on n cards (made here when not given:
    plan_table shares one per method between the models). Plain Python: it may run in a forked child."""
    spreads, estimate = spreads or {}, _remembering(arch, c)

    def per_gpu(cards: int) -> float:
        return estimate(setup(cards)).total / memory.GB

    def upper_bytes(s: memory.Setup) -> float:
        return (upper_gb(estimate(s).total / memory.GB, s.gpus, spreads) + reserve_gb(s.gpus, c)) * memory.GB

    searched: dict[float, tuple[int | None, int | None]] = {}  # the cards depend on the card's memory only
    figures = step_time.SetupFigures(arch, c)  # the setup on n cards: its FLOPs and step bytes, made once
    fp8 = setup(1).fp8
    at = at or _on_cards(setup(2))  # the job's card searches probe the same counts: each setup made once

    plans = []
    for index, server in kinds:
        gpu = gpus[server["gpu_id"]]
        if fp8 and not gpu["fp8_dense_tflops"]:
            continue  # an FP8 setup needs a card with FP8
        size, count = float(gpu["memory_gb"]), int(server["gpu_count"])
        if size not in searched:
            searched[size] = (
                job_cards(arch, setup, c, size, lambda s: estimate(s).total, at),
                job_cards(arch, setup, c, size, upper_bytes, at),
            )
        point, headroom = searched[size]
        fits_all = point is not None and fits_with_headroom(per_gpu(count), count, size, spreads, c)
        reason, chassis = place(count, point, headroom, bool(server["network"]), fits_all)
        cards = None if chassis is None else chassis * count
        row = {
            "reason": reason,
            "servers_count": chassis,
            "gpus_per_job": cards,
            "gpu_id": gpu["gpu_id"],
            "gpus_per_server": count,
            "gpu_memory_gb": size,
            "gpu_has_nvlink": gpu["interconnect"] in NVLINK_CARDS,
            "link": link_of(reason, cards, server),
        }
        if cards is not None:
            row |= _figures(per_gpu(cards), cards, size, spreads, c)
            if reason != "needs_network":  # no time across servers with no declared network
                time = step_time.server_time(arch, setup(cards), gpu, tokens, c, server, chassis, share, figures)
                row |= _time(time, gpu["gpu_id"], band or lookups.TimeBand())
        plans.append((index, row))
    return plans


def _on_cards(sharded: memory.Setup) -> Callable[[int], memory.Setup]:
    """`sharded` on a given number of cards (fewest_cards' `at`), each made once."""
    made: dict[int, memory.Setup] = {}

    def at(cards: int) -> memory.Setup:
        if cards not in made:
            made[cards] = replace(sharded, gpus=cards)
        return made[cards]

    return at


def _time(t: step_time.TrainingTime | None, gpu_id: str, band: lookups.TimeBand) -> dict:
    """A plan's hours (the model's, divided by the published runs' speed factor) split into compute and
    exposed communication, the range the published runs give them out of sample, and whether runs on this
    card and link were measured (otherwise the time is a draft); nothing for no time."""
    if t is None:
        return {}
    hours = band.hours(t.hours)
    return {
        "hours": hours,
        "hours_compute": band.hours(t.hours_compute),
        "hours_communication": band.hours(t.hours_communication),
        "hours_low": None if band.low is None else hours * band.low,
        "hours_high": None if band.high is None else hours * band.high,
        "time_link": t.link,
        "time_measured": band.measured(gpu_id, t.link),
        "efficiency": t.efficiency,
    }


def _figures(figure: float, cards: int, size: float, spreads: Spreads, c: Mapping[str, object]) -> dict:
    """A plan's per-card figure with its measured range, the reserve and the headroom left on the card."""
    spread = spreads.get(setup_kind(cards))
    return {
        "per_gpu_memory_gb": figure,
        "per_gpu_memory_low_gb": None if spread is None else figure * spread[0],
        "per_gpu_memory_high_gb": None if spread is None else figure * spread[1],
        "memory_reserve_gb": reserve_gb(cards, c),
        "headroom_gb": size - upper_gb(figure, cards, spreads) - reserve_gb(cards, c),
    }


def ranked(plans: pl.DataFrame, servers: pl.DataFrame, c: Mapping[str, object]) -> pl.DataFrame:
    """Rows of `plan_job` (with model_id, method_id, tokens) priced under the servers' rental
    terms and ranked: the recommendations table's columns. Rows that carry the prices (the jobs) are
    not joined with the servers again."""
    if not set(training.PRICE_COLUMNS) <= set(plans.columns):
        plans = plans.join(servers.select("server_id", *training.PRICE_COLUMNS), on="server_id")
    return rank(_priced_rows(plans, c)).select(RECOMMENDATIONS.columns)


def _priced_rows(plans: pl.DataFrame, c: Mapping[str, object]) -> pl.DataFrame:
    """Rows of `plan_job` with the prices: the rent (`priced`), `recommended`, and the recommendations
    table's types (all its columns but the rank's)."""
    frame = plans.with_columns(**priced(c)).with_columns(recommended=pl.col("reason").is_in(RECOMMENDED_REASONS))
    schema = {k: v for k, v in RECOMMENDATIONS.polars_schema.items() if k not in ("rank", "tied_on_cost")}
    return frame.select(pl.col(k).cast(v) for k, v in schema.items())


# Card links (gpus.interconnect) that are NVLink: the card can be joined by NVLink where the server has it.
NVLINK_CARDS = ("nvlink", "nvlink-bridge")


def link_of(reason: str, cards: int | None, server: Mapping[str, object]) -> str | None:
    """The link a job runs over, as the server has it: none on one card, the chassis' interconnect
    (NVSwitch, NVLink bridge, PCIe, Infinity Fabric) in one chassis, the declared network across several."""
    if cards is None or reason == "needs_network":
        return None
    if cards == 1:
        return "one_card"
    return server["interconnect"] if reason in ("one_chassis", "tight") else server["network"]


def _remembering(arch, c: Mapping[str, object]) -> Callable[[memory.Setup], memory.Breakdown]:
    """memory.estimate for one model, each setup's computed once (a job's card searches share them).
    A setup asked for again is mostly the very same object (plan_table keeps them): it is found by its
    identity before its hash (a Setup's hash is made of its 22 fields on every call)."""
    estimates: dict[memory.Setup, memory.Breakdown] = {}
    by_identity: dict[int, tuple[memory.Setup, memory.Breakdown]] = {}  # the setup kept: its id stays its own

    def estimate(setup: memory.Setup) -> memory.Breakdown:
        kept = by_identity.get(id(setup))
        if kept is not None and kept[0] is setup:
            return kept[1]
        found = estimates.get(setup)
        if found is None:
            found = estimates[setup] = memory.estimate(arch, setup, c)
        by_identity[id(setup)] = (setup, found)
        return found

    return estimate


# The columns of the jobs (jobs_by_signature, joined), with the types the recommendations table gives them.
JOB_SCHEMA = {
    "model_id": pl.String,
    "method_id": pl.String,
    "server_id": pl.String,
    "reason": pl.String,
    "servers_count": pl.Int64,
    "gpus_per_job": pl.Int64,
    "gpu_id": pl.String,
    "gpus_per_server": pl.Int64,
    "per_gpu_memory_gb": pl.Float64,
    "per_gpu_memory_low_gb": pl.Float64,
    "per_gpu_memory_high_gb": pl.Float64,
    "memory_reserve_gb": pl.Float64,
    "headroom_gb": pl.Float64,
    "gpu_memory_gb": pl.Float64,
    "link": pl.String,
    "gpu_has_nvlink": pl.Boolean,
    "hours": pl.Float64,
    "hours_compute": pl.Float64,
    "hours_communication": pl.Float64,
    "hours_low": pl.Float64,
    "hours_high": pl.Float64,
    "time_link": pl.String,
    "time_measured": pl.Boolean,
    "efficiency": pl.Float64,
}
# What a plan says of a server signature: the job's columns but the ids.
PLAN_COLUMNS = tuple(k for k in JOB_SCHEMA if k not in ("model_id", "method_id", "server_id"))


def measured_range(figure, spread: tuple[float, float]) -> tuple:
    """(low, high) around a first-principles figure (a number or a column): where 80 % of published
    peaks lie for such an estimate, by the (low, high) factors of `spread_of`."""
    return figure * spread[0], figure * spread[1]


def rank(frame: pl.DataFrame) -> pl.DataFrame:
    """Rank within model x method: recommended first (then the risks, in REASONS' order); then the cost
    under the rental terms (priced before on request), the time, and the server id for a stable order.
    `tied_on_cost`: another recommended row of the job costs the same (the time then decides).
    One sort, by the job first: the rows come out grouped by job, each job's in rank order."""
    return _with_rank(frame.sort(_rank_keys(), nulls_last=True))


def _rank_keys() -> list[pl.Expr]:
    """rank's sort keys (with nulls last): the job, then the order of its rows (a total order: the
    server id is last, and a job has one row per server)."""
    return [
        pl.col("model_id"),
        pl.col("method_id"),
        pl.col("recommended").not_(),
        pl.when(pl.col("recommended"))
        .then(0)
        .otherwise(pl.col("reason").replace_strict({r: i for i, r in enumerate(REASONS)}, return_dtype=pl.Int64)),
        pl.col("cost_rub").is_null(),
        pl.col("cost_rub"),
        pl.col("hours"),
        pl.col("server_id"),
    ]


def _with_rank(order: pl.DataFrame) -> pl.DataFrame:
    """Rows in rank order (grouped by job: _rank_keys) with `rank` and `tied_on_cost`, found on the
    rows' neighbours. A job's rows are consecutive, so a row's rank is its distance from its job's first
    row; its recommended rows with a cost come first, by cost, so rows that cost the same are next to
    each other. (Windows over the job's ids hashed every row's text: 0.9 GB more at 10^7 rows.)"""
    model, method, cost = pl.col("model_id"), pl.col("method_id"), pl.col("cost_rub")
    first = ((model != model.shift()) | (method != method.shift())).fill_null(True)  # a job's first row
    row = pl.int_range(pl.len(), dtype=pl.Int64)
    same = (pl.col("recommended") & cost.is_not_null()).fill_null(False)

    def as_neighbour(step: int) -> pl.Expr:
        """The row `step` away is of the same job, recommended with a cost, and costs the same (NaN as NaN)."""
        in_job = ~(first if step > 0 else first.shift(step)).fill_null(True)
        equal = (cost == cost.shift(step)) | (cost.is_nan() & cost.shift(step).is_nan())
        return (in_job & same.shift(step) & equal).fill_null(False)

    rank = row - pl.when(first).then(row).forward_fill() + 1
    return order.with_columns(rank=rank, tied_on_cost=same & (as_neighbour(1) | as_neighbour(-1)))


def without_network_price(frame: pl.DataFrame, servers: pl.DataFrame) -> pl.DataFrame:
    """A plan's rows (`server_id`, `servers`, `cost_rub`) with no total price where the job spans several
    servers that declare no network between them: such a plan is not recommended (rule 11)."""
    networks = servers.select("server_id", has_network=pl.col("network").fill_null("") != "")
    joined = frame.join(networks, on="server_id", how="left", maintain_order="left")
    spans = (pl.col("servers") > 1) & ~pl.col("has_network").fill_null(False)
    return joined.with_columns(cost_rub=pl.when(spans).then(None).otherwise(pl.col("cost_rub"))).select(frame.columns)


def job_gpus(recommendations_frame: pl.DataFrame) -> dict[tuple[str, str], int]:
    """(model, method) -> the cards its rank-1 row uses (recommended or not: a job no single chassis
    holds still runs on the cards of its best option); jobs no card count holds are left out."""
    first = recommendations_frame.filter((pl.col("rank") == 1) & pl.col("gpus_per_job").is_not_null())
    return {(m, k): int(n) for m, k, n in first.select("model_id", "method_id", "gpus_per_job").iter_rows()}


# The lookups on its own tables live with the views' (pipeline/lookups.py); named here too.
best = lookups.best
spread_of = lookups.spread_of
plan_spreads = lookups.plan_spreads
