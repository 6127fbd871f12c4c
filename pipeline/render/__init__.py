"""Stage 5, rendering: the catalog and site_templates/ -> pages and Markdown in memory (site.Renderer).

Rendering only formats: every figure it shows is a row of a derived table (pipeline/combine.py).
"""
