# GPU fine-tuning reference: recipes for editors and developers.

export GX_ANALYTICS_ENABLED := "False"

# The checkout's .venv (./dev-setup.sh makes it) when there is one, so recipes work without activating it.
python := if path_exists(".venv/bin/python") == "true" { ".venv/bin/python" } else { "python3" }

# List the recipes
default:
    @just --list

# Validate sources/, compute every table and write output/ (site, markdown, data)
build *ARGS:
    {{python}} -m pipeline build {{ARGS}}

# Validate sources/ only; writes nothing (e.g. just check --sources other/)
check *ARGS:
    {{python}} -m pipeline check {{ARGS}}

# Run the whole test suite, one pytest-xdist worker per core (-n 0: one process); with CI=true the browser tools are installed and mandatory, elsewhere nothing is installed and a missing tool skips its tests with the reason
test *ARGS:
    #!/usr/bin/env bash
    set -euo pipefail
    if [ -n "${CI:-}" ]; then
        just browser-tools
    else
        just browser-tools-missing || true
    fi
    echo "just test: collecting on $(nproc) workers (the summary line and the 15 slowest tests come at the end)…"
    {{python}} -m pytest -n auto -q --durations=15 {{ARGS}}

# Fuzz the sources for five minutes (the suite fuzzes for 5 s): PIPELINE_FUZZ_SECONDS sets the budget
fuzz *ARGS:
    PIPELINE_FUZZ_SECONDS="${PIPELINE_FUZZ_SECONDS:-300}" {{python}} -m pytest -n 0 -q tests/test_fuzz.py {{ARGS}}

# Random source edits for five minutes, each built as `serve` and a new process would after it and forced: the same bytes (bench/edit_sweep.py; --seconds, --steps, --seed, --rows N for a synthetic catalog)
sweep *ARGS:
    {{python}} bench/edit_sweep.py --seconds 300 {{ARGS}}

# Say which browser-test tools are missing and how to install them (installs nothing); exits 1 when one is
browser-tools-missing:
    #!/usr/bin/env bash
    missing=0
    if [ -z "${CHROMIUM:-}" ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
        echo "note: no chromium: the browser tests are skipped (install it: just browser-tools, or as root apt-get install chromium; or set CHROMIUM=/path)" >&2
        missing=1
    fi
    if [ ! -f node_modules/axe-core/axe.min.js ]; then
        echo "note: no node_modules/axe-core: the browser tests are skipped (install it: just browser-tools, or npm install --no-save axe-core@4)" >&2
        missing=1
    fi
    exit $missing

# The inner loop: the tests that neither build a whole catalog nor drive a browser (markers slow, browser)
test-fast *ARGS:
    {{python}} -m pytest -n auto -m "not slow and not browser" {{ARGS}}

# Install the browser-test tools if missing: Debian's chromium (apt, as root) and axe-core (npm); fails loudly
browser-tools:
    #!/usr/bin/env bash
    set -euo pipefail
    if [ -n "${CHROMIUM:-}" ]; then
        [ -x "$CHROMIUM" ] || { echo "browser-tools: \$CHROMIUM=$CHROMIUM is not an executable" >&2; exit 1; }
    elif ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
        if [ "$(id -u)" != 0 ]; then
            echo "browser-tools: chromium is missing; install it as root (apt-get install chromium) or set CHROMIUM=/path/to/chromium" >&2
            exit 1
        fi
        { apt-get update -qq && apt-get install -y -qq chromium; } || { echo "browser-tools: apt-get install chromium failed" >&2; exit 1; }
    fi
    if [ ! -f node_modules/axe-core/axe.min.js ]; then
        command -v npm >/dev/null || { echo "browser-tools: npm is missing (apt-get install npm) for axe-core" >&2; exit 1; }
        npm install --no-save --no-package-lock --no-audit --no-fund axe-core@4 >/dev/null \
            || { echo "browser-tools: npm install axe-core@4 failed" >&2; exit 1; }
    fi

# Lint and check formatting
lint:
    ruff check pipeline tests bench
    ruff format --check pipeline tests bench

# Benchmark the build and the rules at scale; prints a table, writes bench-results.json (--json PATH, --sizes, --quick);
# `just bench --whole [--sizes 1e6,1e7] [--repo PATH]`: whole-process targets (cpu, peak RSS of the process tree);
# `just bench --tools [--sizes 1e6,1e7]`: diff, release and the release zip on a synthetic catalog
bench *ARGS:
    {{python}} bench/run.py {{ARGS}}

# Write the ids of sources/ into the editors' guide (site_templates/README.md)
guide:
    python -m pipeline.tools.guide

# Serve output/site on http://127.0.0.1:8000, rebuild on every change of sources/ or site_templates/, reload the page
serve *ARGS:
    {{python}} -m pipeline serve {{ARGS}}

# What this build changes against the published one (exit code 0 nothing, 4 changes, 3 cannot compare, 1 a bug)
[no-exit-message]
diff *ARGS:
    {{python}} -m pipeline diff {{ARGS}}

# Copy output/ to published/ (or $PUBLISHED_DIR) for `just diff`; with arguments: just publish --to s3://bucket/prefix
publish *ARGS:
    #!/usr/bin/env bash
    set -euo pipefail
    if [ -n "{{ARGS}}" ]; then exec {{python}} -m pipeline publish {{ARGS}}; fi
    dest="${PUBLISHED_DIR:-published}"
    [ -d output/site ] || { echo "output/site is missing: run just build first" >&2; exit 2; }
    {{python}} -m pipeline release --check-unreleased --out output --against "$dest" || true  # a warning, never a stop
    rm -rf "$dest.new" "$dest.old"
    cp -a output/. "$dest.new"  # the contents: output/ may be a link to the build folder
    if [ -d "$dest" ]; then mv -T "$dest" "$dest.old"; fi
    mv -T "$dest.new" "$dest"
    rm -rf "$dest.old"
    echo "published: $dest"

# First-principles memory of one training setup: just estimate --model llama-3-1-8b --method lora (see --help)
estimate *ARGS:
    {{python}} -m pipeline estimate {{ARGS}}
