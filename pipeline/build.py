"""The flow: sources/ -> output/, in data-flow order (fingerprint -> load -> validate -> combine -> render -> publish).

`build` is what `python -m pipeline build` and the editors' loop (`serve`) call; `check` is
`python -m pipeline check`. The editor tools (pipeline/tools/) import this module; nothing here
imports them. Stage modules are imported inside the functions: a build whose inputs have not
changed answers from the fingerprint alone, without loading polars or DuckDB.

A build whose inputs (sources, templates, code, base URL, build date) are unchanged since the build
in `out` is skipped; one with unchanged sources and code reuses that build's validation. Otherwise
Great Expectations runs in a forked child while this process computes, renders and writes the new
build beside `out` (the XLSX workbooks are made in another child meanwhile); the build is put in
place (with its quality page, the one page that shows the checks) only once every check has passed,
so the result, the report and the exit code are those of validating first.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from pipeline.errors import DataError
from pipeline.messages import message

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a no-change build needs none)
if TYPE_CHECKING:  # imported where used: their dataclasses import `inspect`, which no unchanged build needs
    from pipeline.problems import Problem, Validation
    from pipeline.warm import Warm

Progress = Callable[[str, float], None]
# serve's pages ahead of the build (show_ahead): given the renderer, what shows them once validated, or None.
Preview = Callable[[object], Callable[[], None] | None]


def build(  # noqa: PLR0913
    sources: Path,
    out: Path,
    base_url: str = "/",
    force: bool = False,
    progress: Progress | None = None,
    warm: Warm | None = None,
    preview: Preview | None = None,
) -> dict:
    """Build `sources` into `out`: the output folder is checked first (outdir.check_output,
    outdir.writable), and the build holds the folder's lock, so that a second build of it waits.
    `progress` hears each stage's time; `warm` is what a warm process keeps from build to build
    (pipeline.warm: `serve` passes its own), by default this build's own, dropped when it returns.
    `preview` (`serve`'s) is given the renderer before the pages are rendered (show_ahead)."""
    from pipeline.errors import ConfigError
    from pipeline.publish import outdir
    from pipeline.render.site_links import check_base_url

    try:
        check_base_url(base_url)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    folder = outdir.check_output(out, sources)
    outdir.writable(folder)
    with outdir.locked(folder):
        outdir.tidy(folder)
        return run(sources, folder, base_url, force, progress, warm, preview)


def run(  # noqa: PLR0913
    sources: Path, out: Path, base_url: str, force: bool, progress: Progress | None, warm: Warm | None, preview=None
) -> dict:
    """The whole pipeline (`preview` as build's); returns counts and stage times for the summary line."""
    from pipeline import fingerprint

    clock = Clock(progress)
    inputs = fingerprint.inputs(sources, base_url)
    if not force and fingerprint.is_current(out, inputs):
        return {"unchanged": True, "seconds": {"check": clock.elapsed()}}

    from pipeline.warm import Warm

    warm = Warm() if warm is None else warm
    clock.record("imports", clock.elapsed())
    previous = fingerprint.read_state(out)  # of the build this one replaces

    #
    # Load inputs.
    #
    con, validation, pending, digests = load_inputs(sources, None if force else previous, inputs, clock, warm)

    #
    # Process data.
    #
    workbooks = None
    try:
        kept = None if force else warm.steps  # the tables an edit left as they were (serve's rebuilds)
        catalog = clock.timed("compute", lambda: compute(con, warm, kept, force, digests))
        from pipeline.publish.downloads import made_with, start_workbooks
        from pipeline.render.site import PageMemo, Renderer

        memo = PageMemo(inputs, None if force else previous.get("pages"), out / "site")  # pages to reuse
        renderer = Renderer(catalog, validation, base_url=base_url, warm=warm, memo=memo, sources=sources)
        if preview is not None:  # before the workbooks' child is forked: the open pages wait for nothing else
            clock.timed("preview", lambda: show_ahead(preview, renderer, pending))
        workbooks = start_workbooks(catalog, warm.workbooks, made_with(inputs), not force, warm.kept_files)  # forked
        rendered, staging, writing = render_and_stage(renderer, out, workbooks, force, warm, clock)
    except Exception:
        abandon(workbooks, pending)
        raise

    #
    # Save outputs.
    #
    try:
        if pending is not None:
            validation = published(clock.timed("validation (rest)", pending), sources)
            rendered.site["quality.html"] = renderer.page("quality.html", "quality.html", validation=validation)
        state = {"inputs": inputs, "validation": validation.to_dict(), "pages": memo.now}
        late = {name: rendered.site[name] for name in ("quality.html",) if name in rendered.site}
        tick, before = time.perf_counter(), read_verdicts(out)  # those of the build this one replaces
        counts = staging.swap(state, late, warm.exchange)
        clock.record("write", writing + time.perf_counter() - tick)  # before and after the wait
    except BaseException:
        staging.discard()
        raise
    remember_articles(sources, digests)  # this build rendered every article: their claims hold for these bytes
    extra = staging.outcome(counts) | {"seconds": clock.seconds, "rendered": sorted(memo.rendered)}
    return summary(sources, validation, rendered, catalog, base_url, verdict_warnings(before, catalog, sources)) | extra


def compute(con, warm: Warm, kept, force: bool, digests: dict[str, str]):
    """The catalog (combine.combine). The stages' modules are imported here, not before loading: the
    child that runs Great Expectations, forked while the sources load (load_inputs), needs none of
    them, and this process imports them while it imports GX (docs/operations.md, "Twenty-first round")."""
    import pipeline.publish.downloads
    import pipeline.render.site  # noqa: F401 (used once this returns; imported here with the compute's time)
    from pipeline.combine import FrameMemo, combine

    return combine(con, FrameMemo(warm.frames, read=not force), kept, digests)


def show_ahead(preview: Preview, renderer, pending: Callable[[], Validation] | None) -> None:
    """`serve`'s fast path: `preview` renders the pages an editor has open (Renderer.preview) and
    returns what shows them; they are shown only once the sources have passed every check, the
    suites included (`pending`, waited for here: its DataError stops the build as it would later),
    and the build then renders and writes everything as it would have without them."""
    show = preview(renderer)
    if show is None:
        return
    if pending is not None:
        pending()
    show()


def remember_articles(sources: Path, digests: dict[str, str]) -> None:
    """After a build that was written: `check` of the same bytes need not render the articles again
    (validation_cache.articles_passed), as it need not validate them (the build remembered that)."""
    from pipeline import validation_cache

    validation_cache.remember_articles(sources, digests)


def read_verdicts(out: Path) -> dict | None:
    """The seed-000 verdicts of the build in `out` (from its downloads), None without one."""
    from pipeline import verdicts

    try:
        return verdicts.read_verdicts(out / "site" / "data")
    except Exception:  # a previous build this one cannot read is no reason to stop: nothing to compare
        return None


def verdict_warnings(before: dict | None, catalog, sources: Path) -> list[Problem]:
    """A warning for each offer of seed 000 whose verdict (same server or not) this build flipped."""
    from pipeline import verdicts
    from pipeline.load import display_path
    from pipeline.problems import Problem
    from pipeline.schema import TABLES_BY_NAME

    now = verdicts.verdicts(catalog["legacy_offers"], catalog["legacy_offer_jobs"], catalog.ranked.leading)
    names = dict(catalog["servers"].select("server_id", "display_name").iter_rows())
    file = display_path(sources, TABLES_BY_NAME["legacy_offers"])
    return [Problem(file, 0, "", None, verdicts.flip_text(v, names)) for v in verdicts.flipped(before, now)]


def render_and_stage(renderer, out: Path, workbooks: Callable, force: bool, warm: Warm, clock: Clock) -> tuple:  # noqa: PLR0913
    """(rendered, staging, seconds spent staging after rendering): every page rendered while a thread
    writes the downloads into the new build's folder (staging.Downloads) and Pagefind indexes the pages
    (search.Indexer), then the pages added to it. Pagefind is started first: nothing may fork once
    the thread runs. After a failure the thread is stopped and its folder removed."""
    from pipeline import parallel
    from pipeline.publish.search import Indexer
    from pipeline.publish.staging import Downloads, stage

    downloads = None
    # Pagefind reads each page as it is rendered, on the other core; started before the downloads'
    # threads, as every process the build starts.
    renderer.indexer = indexer = Indexer(stream=parallel.WORKERS > 1)
    try:
        downloads = Downloads(out, renderer.catalog, workbooks, renderer.history.current, force)
        rendered = clock.timed("render", renderer.render)
        tick = time.perf_counter()
        staging = stage(
            out,
            rendered,
            renderer.catalog,
            ("quality.html",),
            indexes=warm.indexes,
            downloads=downloads,
            keep_pages=False,
            indexer=indexer,
        )
        return rendered, staging, time.perf_counter() - tick
    except BaseException:
        indexer.discard()
        if downloads is not None:
            downloads.discard()
        raise


def abandon(workbooks: Callable | None, pending: Callable | None) -> None:
    """After a failed stage: wait for the workbook child (a warm process goes on), then report the
    problems in the sources (pending raises DataError) before what they broke downstream."""
    if workbooks is not None:
        with contextlib.suppress(Exception):
            workbooks()
    if pending is not None:
        pending()


def summary(  # noqa: PLR0913
    sources: Path, validation: Validation, rendered, catalog, base_url: str, flips: list[Problem] = ()
) -> dict:
    """What the summary line reports of a build that was written (with its files and stage times);
    `flips`: the seed-000 verdicts this build changed (verdict_warnings)."""
    from pipeline.render import site_links

    return {
        "unchanged": False,
        "warnings": shown(validation.warnings, sources)
        + rendered.warnings  # + the articles' removed markup
        + site_links.base_url_warning(base_url)
        + list(flips),
        "pages": sum(1 for name in rendered.site if name.endswith(".html")),
        "markdown": len(rendered.markdown),
        "rows": {t: catalog.height(t) for t in ("estimates", "gpu_fit", "server_fit")},
    }


def load_inputs(sources: Path, previous: dict | None, inputs: dict, clock: Clock, warm: Warm):
    """(connection, validation, pending, the SHA-256 of each file as read): without --force (previous given), the previous build's validation
    when the sources (as read now) and the code are unchanged, or the one remembered for the bytes read
    (validation_cache), with pending None; otherwise the validation so far, with the GX suites still running.
    The files are read once, and `inputs["sources"]` becomes the hash of the bytes this build read and
    validated: a file saved meanwhile is never published under the validation of its earlier bytes."""
    child = early_validation(sources, previous, inputs, warm)  # first: before polars and DuckDB load here
    try:
        return _load_inputs(sources, previous, inputs, clock, warm, child)
    finally:
        if child is not None:
            child.close()  # one never sent a table (the validation was known) is killed


def early_validation(sources: Path, previous: dict | None, inputs: dict, warm: Warm):
    """The child that imports Great Expectations while this process reads and loads the sources
    (parallel.Early), where the build will run suites: forced, or sources that neither the previous build
    nor the user cache passed, as the files look now (the bytes read then decide; a child sent no table
    is killed). None in a process that lives on (`serve` keeps GX itself) or has DuckDB loaded already:
    such a process forks the suites' child later (validate.start_expectations)."""
    from pipeline.parallel import Early

    if warm.lives_on or not Early.usable():
        return None
    if previous is not None:
        same = ("sources", "code", "build_date")
        if "validation" in previous and all(previous.get("inputs", {}).get(k) == inputs[k] for k in same):
            return None
        from pipeline import validation_cache as cache

        if cache.remembered_summary(sources) is not None:
            return None
    # Imported (not used) here first, as this process imports them next anyway: the child inherits them.
    import pyarrow  # noqa: F401

    import pipeline.validate  # noqa: F401 (DuckDB, polars, the schema)

    return Early(_prepare_validation)


def _prepare_validation() -> None:
    """In the early child: what running the suites needs (validate.prepare_shipped)."""
    from pipeline.validate import prepare_shipped

    prepare_shipped()


def _load_inputs(sources: Path, previous: dict | None, inputs: dict, clock: Clock, warm: Warm, child):  # noqa: PLR0913
    from pipeline import fingerprint
    from pipeline import validation_cache as cache
    from pipeline.load import read_sources
    from pipeline.parallel import once
    from pipeline.problems import Validation

    tick, digests = time.perf_counter(), {}
    read = read_sources(sources, digests)
    inputs["sources"] = fingerprint.tree_hash(sources, "*.csv", known=digests)
    if previous is not None and not read[1]:
        if "validation" in previous and all(
            previous.get("inputs", {}).get(k) == inputs[k] for k in ("sources", "code", "build_date")
        ):
            con = load_validated_before(sources, digests, read, warm)
            clock.record("load (validation reused)", time.perf_counter() - tick)
            return con, Validation.from_dict(previous["validation"]), None, digests
        remembered = cache.remembered(sources, digests)
        if remembered is not None:  # these bytes passed before, in this or another --out, build or check
            con = load_validated_before(sources, digests, read, warm)
            clock.record("load (validation remembered)", time.perf_counter() - tick)
            return con, published(remembered, sources), None, digests
    with cache.fresh(previous is None):  # --force validates every table anew
        con, validation, pending = start_loading(sources, warm, digests, read, child)
    clock.record("load, validation started", time.perf_counter() - tick)
    # Waited for once or twice (show_ahead waits before the pages are shown): the same outcome each time.
    return con, published(validation, sources), once(pending), digests


def check(sources: Path, on_warnings: Callable[[list[Problem]], None]) -> int:
    """`python -m pipeline check`: validate the sources and the articles' claims, write nothing; returns the
    number of checks (warnings go to `on_warnings` first), raises DataError or TemplateError. Sources that
    passed before (validation_cache) are not checked again."""
    from pipeline import validation_cache as cache
    from pipeline.publish.releases import read_history

    read_history(sources)  # the release history (sources/releases/): DataError when malformed
    known = cache.remembered_summary(sources)  # sources passed before: no rule runs
    if known is not None and cache.articles_passed(sources):
        on_warnings(known[0])
        return known[1]
    from pipeline.combine import combine
    from pipeline.frame_memo import FrameMemo
    from pipeline.render.site import check_articles

    digests: dict[str, str] = {}
    con, validation = load_and_validate(sources, digests)
    on_warnings(validation.warnings)
    check_articles(combine(con, FrameMemo()), validation)  # a claim of an article the data no longer supports
    cache.remember_articles(sources, digests)
    return len(validation.checks)


class Clock:
    """Stage times for the summary (and, as each stage ends, for `progress`)."""

    def __init__(self, progress: Progress | None) -> None:
        self.started = time.perf_counter()
        self.seconds: dict[str, float] = {}
        self.say = progress or (lambda stage, seconds: None)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def record(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = seconds
        self.say(stage, seconds)

    def timed(self, stage: str, step: Callable):
        tick = time.perf_counter()
        result = step()
        self.record(stage, time.perf_counter() - tick)
        return result


def load_and_validate(sources: Path, digests: dict[str, str] | None = None):
    """Load the sources into DuckDB and validate them; raises DataError with every problem.

    Returns the connection (with typed tables) and the Validation (checks, warnings, notices).
    Sources validated before (pipeline.validation_cache) are loaded without validating again.
    `digests` (when given) gets the SHA-256 of each file's bytes as read.
    """
    from pipeline import validation_cache as cache
    from pipeline.load import connect, create_core_tables, read_sources

    digests = {} if digests is None else digests
    frames, problems, notices = read_sources(sources, digests)  # read once: these bytes are validated
    remembered = None if problems else cache.remembered(sources, digests)
    if remembered is not None:
        return load_validated_before(sources, read=(frames, problems, notices)), remembered
    from pipeline.validate import validate

    con = connect(frames)
    validation = validate(con, sources, list(frames))
    problems += validation.problems
    if problems:
        raise DataError(problems)
    validation.warnings = sorted(notices) + validation.warnings
    create_core_tables(con)
    cache.remember(sources, validation, digests)
    return con, validation


def start_loading(  # noqa: PLR0913
    sources: Path, warm: Warm | None = None, digests: dict[str, str] | None = None, read=None, child=None
):
    """load_and_validate with the GX suites left running: (connection, validation so far, pending),
    where pending() waits for the suites and returns the whole Validation or raises DataError.
    `digests` gets the SHA-256 of the bytes read: what the validation is remembered by; `read`: what
    read_sources(sources, digests) returned, when the caller has read the files already; `child`: the
    early child that runs the suites (early_validation), when there is one."""
    from pipeline import validation_cache as cache
    from pipeline.load import connect, create_core_tables, read_sources
    from pipeline.problems import Validation
    from pipeline.validate import start_validation

    digests = {} if digests is None else digests
    frames, problems, notices = read if read is not None else read_sources(sources, digests)
    con = connect(frames, warm, digests)
    early, finish_suites = start_validation(con, sources, list(frames), warm, digests, child)

    def pending() -> Validation:
        validation = finish_suites()
        problems_all = problems + validation.problems
        if problems_all:
            raise DataError(problems_all)
        validation.warnings = sorted(notices) + validation.warnings
        cache.remember(sources, validation, digests)
        return validation

    unsafe = path_id_problems(frames, sources)
    if problems or early.problems or unsafe:
        pending()  # raises DataError with every problem, as load_and_validate does
        raise DataError(unsafe)  # (the suites check ids too: not reached unless they disagree)
    try:
        create_core_tables(con, warm)  # strict casts: cells GX has yet to reject may fail here
    except Exception:
        pending()
        raise
    return con, Validation(warnings=sorted(notices) + early.warnings, build_date=early.build_date), pending


def load_validated_before(sources: Path, digests: dict[str, str] | None = None, read=None, warm: Warm | None = None):
    """Load sources that an earlier build already validated (unchanged since): no GX run (`read`:
    what read_sources returned, when the caller has read them; `digests` their SHA-256 then)."""
    from pipeline.load import connect, create_core_tables, read_sources

    frames, problems, _ = read if read is not None else read_sources(sources, digests)
    problems = problems + path_id_problems(frames, sources)
    if problems:
        raise DataError(problems)
    con = connect(frames, warm, digests)
    create_core_tables(con, warm)
    return con


def path_id_problems(frames: dict, sources: Path) -> list[Problem]:
    """Ids that would not be safe in a file name (the id rule, the length limit), found before
    anything is written: pages are rendered and written while the Great Expectations suites,
    which check the same rules, still run in a forked child."""
    import polars as pl

    from pipeline.load import LINE, display_path
    from pipeline.problems import Problem
    from pipeline.schema import ID_PATTERN, RESERVED_NAMES, SOURCE_TABLES

    found = []
    for table in SOURCE_TABLES:
        frame = frames.get(table.name)
        for field in table.fields if frame is not None else ():
            if field.type != "id":
                continue
            column = pl.col(field.name)
            bad = frame.filter(
                column.is_not_null()
                & (
                    ~column.str.contains(ID_PATTERN)
                    | (column.str.len_chars() > field.max_length)
                    | column.is_in(sorted(RESERVED_NAMES))
                )
            )
            for line, value in bad.select(LINE, field.name).iter_rows():
                too_long = len(value) > field.max_length
                rule = message("rules.too_long", max=field.max_length) if too_long else message("rules.id_pattern")
                if value in RESERVED_NAMES:
                    rule = message("rules.reserved_id", names=", ".join(sorted(RESERVED_NAMES)))
                found.append(Problem(display_path(sources, table), line, field.name, value, rule))
    return found


def _source_names(sources: Path) -> dict[str, str]:
    """How reports name each source file (relative to the working directory) -> its name in `sources`."""
    from pipeline.load import display_path
    from pipeline.schema import SOURCE_TABLES

    return {display_path(sources, table): table.file for table in SOURCE_TABLES}


def published(validation: Validation, sources: Path) -> Validation:
    """The validation as the site shows it (quality.html, data.html) and build-state.json keeps it:
    source files named within the sources folder (`servers.csv`), never by a path of the build machine."""
    import dataclasses

    names = _source_names(sources)
    return dataclasses.replace(
        validation, warnings=[dataclasses.replace(w, file=names.get(w.file, w.file)) for w in validation.warnings]
    )


def shown(warnings: list[Problem], sources: Path) -> list[Problem]:
    """Published warnings as the terminal shows them: source files named from the working directory."""
    import dataclasses

    names = {name: path for path, name in _source_names(sources).items()}
    return [dataclasses.replace(w, file=names.get(w.file, w.file)) for w in warnings]
