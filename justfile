# GPU fine-tuning reference: recipes for editors and developers.

export GX_ANALYTICS_ENABLED := "False"

# List the recipes
default:
    @just --list

# Validate sources/, compute every table and write output/ (site, markdown, data)
build *ARGS:
    python -m pipeline build {{ARGS}}

# Validate sources/ only; writes nothing
check:
    python -m pipeline check

# Run the whole test suite (installs the browser-test tools first if they are missing)
test *ARGS: browser-tools
    python -m pytest {{ARGS}}

# Install the browser-test tools if missing: Debian's chromium (apt) and axe-core (npm)
browser-tools:
    #!/usr/bin/env bash
    set -euo pipefail
    if [ ! -x /usr/bin/chromium ]; then apt-get update -qq && apt-get install -y -qq chromium; fi
    if [ ! -f node_modules/axe-core/axe.min.js ]; then
        npm install --no-save --no-package-lock --no-audit --no-fund axe-core@4 >/dev/null
    fi

# Lint and check formatting
lint:
    ruff check pipeline tests
    ruff format --check pipeline tests

# Benchmark the build and the rules at scale; prints a table, writes bench-results.json (--json PATH, --sizes, --quick)
bench *ARGS:
    python bench/run.py {{ARGS}}

# Write the ids of sources/ into the editors' guide (site_templates/README.md)
guide:
    python -m pipeline.guide

# Serve output/site on http://127.0.0.1:8000, rebuild on every change of sources/ or site_templates/, reload the page
serve *ARGS:
    python -m pipeline serve {{ARGS}}

# What this build changes against the published one (exit code 0 nothing, 1 changes, 3 error)
[no-exit-message]
diff *ARGS:
    python -m pipeline diff {{ARGS}}

# Record output/ as the published build in published/ (or $PUBLISHED_DIR), which `just diff` compares with
publish:
    #!/usr/bin/env bash
    set -euo pipefail
    dest="${PUBLISHED_DIR:-published}"
    [ -d output/site ] || { echo "output/site is missing: run just build first" >&2; exit 2; }
    rm -rf "$dest.new" "$dest.old"
    cp -a output/. "$dest.new"  # the contents: output/ may be a link to the build folder
    if [ -d "$dest" ]; then mv -T "$dest" "$dest.old"; fi
    mv -T "$dest.new" "$dest"
    rm -rf "$dest.old"
    echo "published: $dest"

# First-principles memory of one training setup: just estimate --model llama-3-1-8b --method lora (see --help)
estimate *ARGS:
    python -m pipeline estimate {{ARGS}}
