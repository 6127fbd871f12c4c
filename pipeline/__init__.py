"""The GPU fine-tuning reference pipeline: sources/ -> output/ (see pipeline/build.py for the flow)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "site_templates"  # everything an editor or a visitor reads
