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

# Run the whole test suite
test *ARGS:
    python -m pytest {{ARGS}}

# Lint and check formatting
lint:
    ruff check pipeline tests
    ruff format --check pipeline tests
