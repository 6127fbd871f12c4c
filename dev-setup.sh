#!/usr/bin/env bash
# Create .venv in this checkout and install the locked stack into it (uv.lock); needs no root.
#   ./dev-setup.sh          the whole stack with the development tools, from uv.lock (uv, fast)
#   PIP=1 ./dev-setup.sh    the same with pip from the declared ranges instead of the lock
# Works with a system Python that refuses `pip install` (PEP 668): everything goes into .venv.
set -euo pipefail
cd "$(dirname "$0")"
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    if ! "$python" -m venv .venv; then
        rm -rf .venv
        echo "dev-setup: '$python -m venv' failed: on Debian/Ubuntu install python3-venv (as root: apt-get install python3-venv), or set PYTHON to a Python 3.11+ that has venv" >&2
        exit 3
    fi
fi
if [ "${PIP:-}" = 1 ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[dev]"
else
    uv=$(command -v uv || true)
    if [ -z "$uv" ]; then
        .venv/bin/python -m pip install --quiet "uv>=0.5"
        uv=.venv/bin/uv
    fi
    # --frozen: exactly uv.lock; --inexact: pip stays in .venv; --compile-bytecode: as pip does (below)
    UV_PROJECT_ENVIRONMENT=.venv "$uv" sync --quiet --frozen --inexact --extra dev --compile-bytecode
fi
# Bytecode for the checkout's own code too: where PYTHONDONTWRITEBYTECODE is set, or the folders are
# read-only, Python never writes it, and every command would compile what it imports from source
# (with the libraries' own, about 2 s of every build: docs/operations.md, "Bytecode").
.venv/bin/python -m compileall -q -j 0 pipeline >/dev/null
echo "dev-setup: .venv is ready; activate it with: . .venv/bin/activate"
