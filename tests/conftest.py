import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from pipeline.estimate.architecture import Architecture

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
# A fixed build date, so that "in the future" and "checked N days ago" give the same answers every day.
os.environ["SOURCE_DATE_EPOCH"] = "1796428800"  # 2026-12-05
# One folder of this test run, shared by every pytest-xdist worker (each inherits the variable from the
# controller, which sets it first): the user cache (validated catalogs, validation outcomes, keyed by
# content, so a worker reuses what another validated) and the shared builds; never ~/.cache.
if "GPU_FINETUNE_TEST_RUN" not in os.environ:
    os.environ["GPU_FINETUNE_TEST_RUN"] = tempfile.mkdtemp(prefix="gpu-finetune-tests-")
    os.environ["GPU_FINETUNE_TEST_RUN_OWNER"] = str(os.getpid())  # removes it when the run ends
RUN_FOLDER = Path(os.environ["GPU_FINETUNE_TEST_RUN"])
os.environ["GPU_FINETUNE_CACHE_DIR"] = str(RUN_FOLDER / "cache")

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "sources"

# Model shapes the estimator's tests share, from each model's config.json.
# meta-llama/Llama-2-7b-hf (models.csv's llama-2-7b): P = 6 738 415 616.
LLAMA2_7B = Architecture(
    layers=32,
    hidden=4096,
    intermediate=11008,
    heads=32,
    kv_heads=32,
    head_dim=128,
    vocab=32000,
    tied_embeddings=False,
    gated_mlp=True,
)
# Meta-Llama-3-8B (models.csv's llama-3-1-8b has the same shape): P = 8 030 261 248.
LLAMA3_8B = Architecture(
    layers=32,
    hidden=4096,
    intermediate=14336,
    heads=32,
    kv_heads=8,
    head_dim=128,
    vocab=128256,
    tied_embeddings=False,
    gated_mlp=True,
)

# The rules' constants as in sources/constants.csv, for tests on small inline catalogs.
RULE_CONSTANTS = {
    "range_low_factor": 0.7,
    "range_high_factor": 1.5,
    "adamw_weight_bytes": 2,
    "adamw_grad_bytes": 2,
    "adamw_optimizer_bytes": 12,
    "anchor_size_tolerance": 0.01,
}


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    """A private, editable copy of sources/."""
    copy = tmp_path / "sources"
    shutil.copytree(SOURCES, copy)
    return copy


@pytest.fixture(scope="session")
def catalog():
    from pipeline.build import load_and_validate
    from pipeline.combine import combine

    return combine(load_and_validate(SOURCES)[0])


@contextlib.contextmanager
def run_lock(name: str):
    """A lock of this test run (every xdist worker): one worker makes a shared thing, the others wait."""
    RUN_FOLDER.mkdir(parents=True, exist_ok=True)
    with open(RUN_FOLDER / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def shared_build(name: str, sources: Path = SOURCES, **options) -> Path:
    """output/ of one build of `sources` in this test run, made by the first worker that asks and shared
    read-only by every test of every worker (a build is put in place whole, so one that exists is complete)."""
    from pipeline.build import build

    out = RUN_FOLDER / "builds" / name / "output"
    with run_lock(f"build-{name}"):
        if not (out / "build-state.json").is_file():
            build(sources, out, **options)
    return out


@pytest.fixture(scope="session", autouse=True)
def heavy_runtimes_once():
    """Great Expectations imported once per test process (about 2 s): the forked child that runs an
    edited table's suites inherits it, where each such validation imported it anew."""
    from pipeline import validate

    validate._import_gx()


@pytest.fixture(scope="session")
def built() -> Path:
    """output/ of one build of the real sources, shared by the whole run: never write into it."""
    return shared_build("real")


def pytest_unconfigure(config):
    """The run's folder is removed by the process that made it (the controller, or the only process)."""
    if not hasattr(config, "workerinput") and os.environ.get("GPU_FINETUNE_TEST_RUN_OWNER") == str(os.getpid()):
        shutil.rmtree(RUN_FOLDER, ignore_errors=True)


def _method_ids() -> list[str]:
    import csv

    with open(SOURCES / "methods.csv", encoding="utf-8") as methods:
        return [row["method_id"] for row in sorted(csv.DictReader(methods), key=lambda r: float(r["sort_order"]))]


# Every method of sources/methods.csv, in its order: a browser sweep over all models runs once per method.
METHOD_IDS = _method_ids()


def edit_csv(path: Path, old: str, new: str) -> None:
    """Replace one exact piece of a source file (fails loudly if it is not there)."""
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def find_chromium() -> Path | None:
    """The browser the browser tests drive (Playwright downloads none): $CHROMIUM if set, else the first
    chromium or chrome on PATH, else the usual macOS place."""
    if os.environ.get("CHROMIUM"):
        return Path(os.environ["CHROMIUM"])
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        if found := shutil.which(name):
            return Path(found)
    mac = Path("/Applications/Chromium.app/Contents/MacOS/Chromium")
    return mac if mac.exists() else None


CHROMIUM = find_chromium()
IN_CI = bool(os.environ.get("CI"))
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"


def missing_browser_tools() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if CHROMIUM is None or not CHROMIUM.exists():
        where = (
            f"$CHROMIUM={os.environ['CHROMIUM']} does not exist"
            if os.environ.get("CHROMIUM")
            else "no chromium on PATH"
        )
        return f"{where}: install it (`just browser-tools`, as root: apt-get install chromium) or set $CHROMIUM"
    if not AXE.exists():
        return f"{AXE.relative_to(ROOT)} is missing: run `just browser-tools` (npm install axe-core@4)"
    return None


# Tests that build or validate a whole catalog (Great Expectations, every page) are `slow`.
SLOW_FIXTURES = {"built", "catalog", "site_server", "sources", "browser"}


def pytest_collection_modifyitems(config, items):
    """Every test that drives the browser carries the `browser` marker (`-m "not browser"` leaves them out);
    without the tools they are skipped with the reason, except in CI (CI=true), where they are mandatory."""
    reason = missing_browser_tools()
    for item in items:
        if set(getattr(item, "fixturenames", ())) & SLOW_FIXTURES:
            item.add_marker(pytest.mark.slow)  # `just test-fast` skips slow and browser tests
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
            if reason and not IN_CI:
                item.add_marker(pytest.mark.skip(reason=f"browser test skipped: {reason}"))


CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@contextlib.contextmanager
def serve_directory(directory: Path):
    """`directory` over http://127.0.0.1 (a free port), served by a background thread; yields the base URL."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=directory))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def site_server(built):
    """The built site over HTTP; yields the base URL."""
    with serve_directory(built / "site") as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    """Headless Debian chromium driven by Playwright."""
    if reason := missing_browser_tools():
        pytest.fail(f"browser tests are mandatory in CI: {reason}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh Russian-locale page of the session's browser; fails the test on any error in the page's script."""
    context = browser.new_context(locale="ru-RU")
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert errors == []


# Form actions and a read, in the page: what Playwright's select_option and fill send (a select: its
# option chosen, then `input` and `change`, both bubbling; a text field: its value, then `input`), then
# the read function's result. A sweep over every model is one call instead of two or three per model.
_SWEEP = """async (steps) => {
  const read = READ;
  const out = [];
  for (const actions of steps) {
    for (const [selector, value] of actions) {
      const field = document.querySelector(selector);
      if (field === null) throw new Error(`no ${selector}`);
      if (field.tagName === "SELECT") {
        if (![...field.options].some((o) => o.value === value)) throw new Error(`${selector} has no option ${value}`);
        field.value = value;
        field.dispatchEvent(new Event("input", { bubbles: true, composed: true }));
        field.dispatchEvent(new Event("change", { bubbles: true }));
      } else {
        field.focus();
        field.value = value;
        field.dispatchEvent(new InputEvent("input", { bubbles: true, composed: true, inputType: "insertText", data: value }));
      }
    }
    out.push(await read());
  }
  return out;
}"""


def sweep(page, steps: list[list[tuple[str, str]]], read: str) -> list:
    """For each step, its (selector, value) form actions as select_option and fill make them, then the
    JavaScript function `read` (its source, written into the sweep: no eval, which a page's content
    security policy may forbid): the reads, in one round trip to the page."""
    return page.evaluate(_SWEEP.replace("READ", f"({read})", 1), steps)


def serious_axe_violations(page) -> list[dict]:
    """axe-core's serious and critical violations on the page as it is now (id and a few targets)."""
    page.add_script_tag(path=str(AXE))
    violations = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations
            .map(v => ({id: v.id, impact: v.impact, targets: v.nodes.slice(0, 3).map(n => n.target.join(" "))}))"""
    )
    return [v for v in violations if v["impact"] in ("serious", "critical")]


# -- the slow-test check -------------------------------------------------------------------------
# A test may take at most TEST_LIMIT_S seconds (its call, not the shared fixtures it waits for): the
# offenders are listed at the end of every run. A run fails on a test over TEST_CEILING_S (three times
# the limit: a test that slow was added, not slowed by a busy machine) in CI, and on any offender with
# GPU_FINETUNE_TEST_LIMIT=strict. A speed target belongs in `just bench`, not in a test.
TEST_LIMIT_S = float(os.environ.get("GPU_FINETUNE_TEST_LIMIT_S", "10"))
TEST_CEILING_S = 3 * TEST_LIMIT_S
STRICT_LIMIT = os.environ.get("GPU_FINETUNE_TEST_LIMIT") == "strict"
_SLOW: list[tuple[str, float]] = []


def _failing(slow: list[tuple[str, float]]) -> list[tuple[str, float]]:
    if STRICT_LIMIT:
        return slow
    return [(nodeid, seconds) for nodeid, seconds in slow if IN_CI and seconds > TEST_CEILING_S]


def pytest_runtest_logreport(report):
    if report.when == "call" and report.duration > TEST_LIMIT_S:
        _SLOW.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter):
    if _SLOW:
        failing = _failing(_SLOW)
        terminalreporter.section(f"tests over the {TEST_LIMIT_S:g} s limit", sep="=", red=bool(failing))
        for nodeid, seconds in sorted(_SLOW, key=lambda item: -item[1]):
            terminalreporter.line(f"{seconds:7.2f}s  {nodeid}")
        if failing:
            terminalreporter.line("the run fails: make each test faster, or move a speed or size sweep to `just bench`")


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 0 and not hasattr(session.config, "workerinput") and _failing(_SLOW):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
