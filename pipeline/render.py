"""Stage 5, rendering: catalog + site_templates -> Markdown and HTML pages (in memory).

Article bodies are Markdown with Jinja placeholders. Each article is rendered
twice: once to Markdown for the CMS (tables as escaped Markdown tables) and once
to HTML (prose through `markdown`, tables through an autoescaped Jinja macro).
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from pathlib import Path

import jinja2
import markdown
from markupsafe import Markup

from pipeline import format as fmt
from pipeline.combine import Catalog
from pipeline.problems import Problem
from pipeline.schema import ALL_TABLES, TYPE_NAMES_RU
from pipeline.tables import Tables, TableView
from pipeline.validate import Validation

TEMPLATES = Path(__file__).resolve().parent.parent / "site_templates"
TOKEN = "TABLEPLACEHOLDER{}X"


@dataclass(frozen=True)
class Article:
    slug: str
    title: str
    description: str
    order: int
    nav: str  # short label for the navigation bar
    body: str  # the template source, front matter removed


@dataclass(frozen=True)
class Rendered:
    """Everything a build writes, as text, keyed by path relative to its root."""

    site: dict[str, str | bytes]
    markdown: dict[str, str]


class TemplateError(Exception):
    """An article template refers to something the catalog does not have."""

    def __init__(self, problems: list[Problem]):
        super().__init__(f"{len(problems)} problem(s) in the templates")
        self.problems = problems


def load_labels(templates: Path = TEMPLATES) -> dict:
    return tomllib.loads((templates / "labels.toml").read_text(encoding="utf-8"))


def read_articles(templates: Path = TEMPLATES) -> list[Article]:
    """Articles from site_templates/articles/*.md: front matter between '---' lines, then the body.

    Front matter keys: title, description, order (position in the navigation), nav (its label).
    """
    articles = []
    for path in sorted((templates / "articles").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        _, head, body = text.split("---\n", 2)
        meta = dict(line.split(": ", 1) for line in head.strip().splitlines())
        articles.append(Article(path.stem, meta["title"], meta["description"], int(meta["order"]), meta["nav"], body))
    return sorted(articles, key=lambda a: (a.order, a.slug))


def markdown_table(view: TableView, sources: str) -> str:
    align = ["---:" if n else "---" for n in view.numeric] or ["---"] * len(view.headers)
    lines = [
        "| " + " | ".join(fmt.md_cell(h) for h in view.headers) + " |",
        "|" + "|".join(align) + "|",
    ]
    lines += ["| " + " | ".join(fmt.md_cell(c) for c in row) + " |" for row in view.rows]
    out = "\n".join(lines)
    for note in view.notes:
        out += "\n\n" + fmt.md_cell(note)
    return out + "\n\n" + sources


class Renderer:
    def __init__(self, catalog: Catalog, validation: Validation | None = None, templates: Path = TEMPLATES):
        self.catalog = catalog
        self.validation = validation
        self.templates = templates
        self.labels = load_labels(templates)
        self.tables = Tables(catalog, self.labels)
        self.html_env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(templates),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
        )
        self.html_env.filters.update(gb=fmt.gb, integer=fmt.integer, date=fmt.date, number=fmt.number)
        self.assets: dict[str, bytes] = {}

    def asset(self, filename: str) -> str:
        """A file of site_templates/static/, published under a content-hashed name (returned)."""
        content = (self.templates / "static" / filename).read_bytes()
        stem, _, ext = filename.rpartition(".")
        name = f"{stem}.{hashlib.sha256(content).hexdigest()[:10]}.{ext}"
        self.assets[name] = content
        return name

    # -- sources line under each table --
    def source_refs(self, view: TableView) -> list[dict]:
        return [self.tables.reference(r) for r in view.references]

    def sources_markdown(self, view: TableView) -> str:
        C = self.labels["common"]
        parts = []
        for ref in self.source_refs(view):
            title = fmt.md_cell(ref["title"])
            shown = f"[{title}]({fmt.md_url(ref['url'])})" if ref["url"] else title
            parts.append(f"{shown}, {C['checked']} {fmt.date(ref['checked_on'])}")
        downloads = ", ".join(f"[{name}.csv](data/{name}.csv)" for name in view.downloads)
        label = C["sources"] if len(parts) > 1 else C["source"]
        return f"{label}: " + "; ".join(parts) + f". {C['download']}: {downloads}."

    # -- articles --
    def render_article(self, article: Article, mode: str) -> tuple[str, dict[str, TableView]]:
        """The article body in Markdown; in html mode, tables are left as tokens to fill later."""
        views: dict[str, TableView] = {}

        def table(kind: str, **kwargs) -> Markup:
            view = getattr(self.tables, f"{kind}_table")(**kwargs)
            if mode == "md":
                return Markup(markdown_table(view, self.sources_markdown(view)))
            token = TOKEN.format(len(views))
            views[token] = view
            return Markup("\n\n" + token + "\n\n")

        # Every value a template prints is made inert Markdown (no links, emphasis or HTML from data);
        # only the tables, already escaped, pass as they are.
        env = jinja2.Environment(
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            finalize=lambda v: v if isinstance(v, Markup) else fmt.md_inline(v),
            keep_trailing_newline=True,
        )
        template = env.from_string(article.body)
        try:
            text = template.render(t=self.tables, table=table, fmt=fmt, labels=self.labels)
        except KeyError as exc:
            raise TemplateError(
                [Problem(f"site_templates/articles/{article.slug}.md", 0, "", None, f"unknown id {exc}")]
            ) from None
        return text, views

    def article_html(self, article: Article) -> str:
        text, views = self.render_article(article, "html")
        body = markdown.markdown(text, extensions=["tables", "sane_lists"], output_format="html")
        macro = self.html_env.get_template("partials/table.html").module
        for token, view in views.items():
            html = macro.render_table(view=view, refs=self.source_refs(view), labels=self.labels, root="")
            body = body.replace(f"<p>{token}</p>", str(html))
        return body

    def page(self, template: str, path: str, **context) -> str:
        depth = path.count("/")
        root = "../" * depth
        return self.html_env.get_template(template).render(
            root=root,
            asset=lambda filename: root + self.asset(filename),
            nav=self.articles,
            labels=self.labels,
            path=path,
            **context,
        )

    def render(self) -> Rendered:
        self.articles = read_articles(self.templates)
        site: dict[str, str | bytes] = {}
        md: dict[str, str] = {}
        for article in self.articles:
            text, _ = self.render_article(article, "md")
            md[f"{article.slug}.md"] = f"# {article.title}\n\n{text.strip()}\n"
            site[f"{article.slug}.html"] = self.page(
                "article.html", f"{article.slug}.html", article=article, body=Markup(self.article_html(article))
            )
        site["index.html"] = self.page("index.html", "index.html", articles=self.articles)
        site["data.html"] = self.page(
            "data.html",
            "data.html",
            tables=self.data_tables(),
            type_names=TYPE_NAMES_RU,
            warnings=self.validation.warnings if self.validation else [],
        )
        references = self.catalog["references"].sort("reference_id").iter_rows(named=True)
        site["sources.html"] = self.page("sources.html", "sources.html", references=list(references))
        if self.validation is not None:
            site["quality.html"] = self.page("quality.html", "quality.html", validation=self.validation)
        site.update(self.assets)
        return Rendered(site, md)

    def data_tables(self) -> list[dict]:
        return [{"table": t, "rows": self.catalog[t.name].height, "kind": t.kind} for t in ALL_TABLES]
