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
