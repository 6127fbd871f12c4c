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
from markupsafe import Markup, escape

from pipeline import calculator, charts
from pipeline import format as fmt
from pipeline.combine import Catalog
from pipeline.downloads import EXCEL_MAX_ROWS
from pipeline.pages import EntityTables, config_problems
from pipeline.problems import Problem, TemplateError
from pipeline.schema import ALL_TABLES, TYPE_NAMES_RU
from pipeline.tables import Link, Tables, TableView
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
    def __init__(
        self,
        catalog: Catalog,
        validation: Validation | None = None,
        templates: Path = TEMPLATES,
        base_url: str = "/",
    ):
        self.catalog = catalog
        self.validation = validation
        self.templates = templates
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self.labels = load_labels(templates)
        self.site_config = tomllib.loads((templates / "site.toml").read_text(encoding="utf-8"))
        self.tables = Tables(catalog, self.labels)
        problems = config_problems(self.tables, self.site_config)
        if problems:
            raise TemplateError(problems)
        self.entities = EntityTables(self.tables, self.labels, self.site_config)
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

    def page(self, template: str, path: str, root: str | None = None, **context) -> str:
        """One HTML page; `root` leads from it back to the site root, so links work under any base path."""
        root = "../" * path.count("/") if root is None else root
        self.pages.append(path)
        macro = self.html_env.get_template("partials/table.html").module
        return self.html_env.get_template(template).render(
            root=root,
            asset=lambda filename: root + self.asset(filename),
            table=lambda view: macro.render_table(
                view=view, refs=self.source_refs(view), labels=self.labels, root=root
            ),
            nav=self.articles,
            labels=self.labels,
            path=path,
            canonical=self.base_url + path.removesuffix("index.html"),
            **context,
        )

    def entity_pages(self) -> dict[str, str]:
        """A page per model, method, GPU and server, an index of each kind, and the comparisons."""
        E, t, out = self.entities, self.tables, {}
        kinds = self.labels["entity_pages"]
        for kind, view in (
            ("models", E.models_index()),
            ("methods", E.methods_index()),
            ("gpus", E.gpus_index()),
            ("servers", E.servers_index()),
        ):
            out[f"{kind}/index.html"] = self.page(
                "list.html",
                f"{kind}/index.html",
                heading=kinds[kind]["title"],
                description=kinds[kind]["description"],
                view=view,
            )

        def entity(kind: str, entity_id: str, template: str, **context) -> None:
            path = f"{kind}/{entity_id}.html"
            out[path] = self.page(
                template, path, section_href=f"{kind}/index.html", section_title=kinds[kind]["title"], **context
            )

        for m in E.model_ids():
            model = t.model(m)
            entity(
                "models",
                m,
                "model.html",
                model=model,
                heading=model["display_name"],
                facts=self.model_facts(model),
                memory=E.model_memory(m),
                cards=E.model_cards(m),
                servers=E.model_servers(m),
                cheapest=E.model_cheapest(m),
            )
        for me in E.method_ids():
            method = t.method(me)
            facts = [
                (kinds["methods"]["bits"], fmt.integer(method["bits"])),
                (kinds["methods"]["name_en"], method["name_en"]),
            ]
            entity(
                "methods",
                me,
                "method.html",
                method=method,
                heading=method["name_ru"],
                facts=facts,
                models=E.method_models(me),
            )
        for g in E.gpu_ids():
            gpu = t.gpu(g)
            entity(
                "gpus",
                g,
                "gpu.html",
                gpu=gpu,
                heading=gpu["name"],
                facts=self.gpu_facts(gpu),
                summary=E.gpu_summary(g),
                models=E.gpu_models(g),
            )
        for s in E.server_ids():
            server = t.server(s)
            entity(
                "servers",
                s,
                "server.html",
                server=server,
                heading=server["display_name"],
                facts=self.server_facts(server),
                jobs=E.server_jobs(s),
            )
        compare = self.labels["compare"]
        methods = [(f"compare/gpu-cards-{me}.html", t.method(me)["name_ru"]) for me in E.method_ids()]
        out["compare/index.html"] = self.page("compare_index.html", "compare/index.html", methods=methods)
        out["compare/server-fit.html"] = self.page(
            "compare.html",
            "compare/server-fit.html",
            heading=compare["server_fit_title"],
            description=compare["server_fit_description"],
            view=E.compare_server_fit(),
            others=[],
        )
        for href, name in methods:
            me = href.removeprefix("compare/gpu-cards-").removesuffix(".html")
            out[href] = self.page(
                "compare.html",
                href,
                heading=compare["gpu_cards_title"].format(method=name),
                description=compare["gpu_cards_description"].format(method=name),
                view=E.compare_gpu_cards(me),
                others=[(h, n) for h, n in methods if h != href],
            )
        return out

    def model_facts(self, model: dict) -> list:
        F = self.labels["entity_pages"]["models"]
        facts = [(F["family"], model["family"]), (F["params"], fmt.number(model["params_b"], 2))]
        if model["active_params_b"] is not None:
            facts.append((F["active"], fmt.number(model["active_params_b"], 2)))
        if model["licence"]:
            facts.append((F["licence"], model["licence"]))
        return facts + [(F["source"], self.reference_link(model["reference_id"]))]

    def gpu_facts(self, gpu: dict) -> list:
        F, names = self.labels["entity_pages"]["gpus"], self.labels["entities"]
        facts = [
            (F["memory"], fmt.gb(gpu["memory_gb"])),
            (F["bandwidth"], fmt.number(gpu["memory_bandwidth_gbs"])),
            (F["bf16"], fmt.number(gpu["bf16_dense_tflops"])),
            (F["fp8"], fmt.number(gpu["fp8_dense_tflops"]) or "—"),
            (F["interconnect"], names["interconnects"][gpu["interconnect"]]),
            (F["link"], fmt.number(gpu["link_gbs"]) or "—"),
            (F["form"], names["form_factors"][gpu["form_factor"]]),
        ]
        return facts + [(F["source"], self.reference_link(gpu["reference_id"]))]

    def server_facts(self, server: dict) -> list:
        F, names = self.labels["entity_pages"]["servers"], self.labels["entities"]
        memory = self.tables.server_memory_gb(server["server_id"])
        price = server["price_rub_month"]
        facts = [
            (F["gpu"], self.tables.gpu_link(server["gpu_id"])),
            (F["count"], fmt.integer(server["gpu_count"])),
            (F["memory"], fmt.gb(memory)),
            (F["interconnect"], names["interconnects"][server["interconnect"]]),
            (F["platform"], server["platform"]),
            (F["price"], fmt.integer(price) if price is not None else self.labels["common"]["price_on_request"]),
        ]
        if price is not None:
            facts.append((F["price_per_gb"], fmt.integer(price / memory)))
            facts.append((F["price_date"], fmt.date(server["price_checked_on"])))
        return facts + [(F["source"], self.reference_link(server["reference_id"]))]

    def reference_link(self, reference_id: str):
        ref = self.tables.reference(reference_id)
        checked = f"{ref['title']}, {self.labels['common']['checked']} {fmt.date(ref['checked_on'])}"
        return Link(checked, f"sources.html#ref-{reference_id}")

    def cdn_files(self) -> dict[str, str]:
        """sitemap.xml, robots.txt and 404.html (whose links are absolute: it is served at any path)."""
        pages = sorted(p for p in self.pages if p != "404.html")
        urls = "".join(f"<url><loc>{escape(self.base_url + p.removesuffix('index.html'))}</loc></url>\n" for p in pages)
        sitemap = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n' + urls + "</urlset>\n"
        )
        robots = f"User-agent: *\nAllow: /\nSitemap: {self.base_url}sitemap.xml\n"
        return {"sitemap.xml": sitemap, "robots.txt": robots}

    def render(self) -> Rendered:
        self.articles = read_articles(self.templates)
        self.pages: list[str] = []
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
            excel_max_rows=EXCEL_MAX_ROWS,
            warnings=self.validation.warnings if self.validation else [],
        )
        references = self.catalog["references"].sort("reference_id").iter_rows(named=True)
        site["sources.html"] = self.page("sources.html", "sources.html", references=list(references))
        if self.validation is not None:
            site["quality.html"] = self.page("quality.html", "quality.html", validation=self.validation)
        site.update(self.entity_pages())
        site["404.html"] = self.not_found_page()
        site.update(charts.pages(self))
        site["calculator.html"] = self.page(
            "calculator.html",
            "calculator.html",
            constants=self.catalog.constants,
            notes=calculator.constant_notes(self.catalog),
            sources=[
                self.tables.reference(r)
                for r in dict.fromkeys(
                    self.catalog["memory_anchors"]["reference_id"].to_list()
                    + self.catalog["servers"]["reference_id"].to_list()
                    + self.catalog["gpus"]["reference_id"].to_list()
                )
            ],
        )
        site["data/calculator.json"] = calculator.calculator_json(self.catalog)
        site.update(self.cdn_files())  # after every page: the sitemap lists them all
        site.update(self.assets)
        return Rendered(site, md)

    def not_found_page(self) -> str:
        """404.html is served at whatever path was asked for: its links start from the base URL."""
        return self.page("404.html", "404.html", root=self.base_url)

    def data_tables(self) -> list[dict]:
        return [
            {
                "table": t,
                "rows": self.catalog[t.name].height,
                "kind": t.kind,
                "xlsx": self.catalog[t.name].height <= EXCEL_MAX_ROWS,
            }
            for t in ALL_TABLES
        ]
