"""`site/data/datapackage.json`: every CSV download described as a Frictionless Data Package.

Generated from the registry (pipeline/schema.py), like the metadata.json sidecars: Table Schema types,
required and allowed values, units, Russian titles and descriptions, primary and foreign keys, the
sources each table rests on, and the data licence (site_templates/site.toml `[data_licence]`).
Readers get typed loading for free: `frictionless validate datapackage.json`, R's `frictionless`
package, pandas through `dtype_backend`, Julia's DataPackage readers.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from pipeline.fingerprint import TEMPLATES
from pipeline.schema import ALL_TABLES, Field, Table

NAME = "datapackage.json"
PROFILE = "tabular-data-package"

# The registry's types as Table Schema types.
TYPES = {"id": "string", "str": "string", "int": "integer", "float": "number", "bool": "boolean", "date": "date"}


def data_licence(templates: Path = TEMPLATES) -> dict:
    """The licence of the published data (site.toml `[data_licence]`): id (SPDX), title, title_ru, url."""
    site = tomllib.loads((templates / "site.toml").read_text(encoding="utf-8"))
    licence = site["data_licence"]
    return {key: licence[key] for key in ("id", "title", "title_ru", "url")}


def package_text(templates: Path = TEMPLATES) -> dict:
    """The package's title and description as data portals show them (site.toml `[data_package]`)."""
    site = tomllib.loads((templates / "site.toml").read_text(encoding="utf-8"))
    return {key: site["data_package"][key] for key in ("title", "description", "author")}


def licence_entry(licence: dict) -> dict:
    """The licence as Frictionless (and data portals) write it."""
    return {"name": licence["id"], "title": licence["title"], "path": licence["url"]}


def field_descriptor(field: Field, table: Table) -> dict:
    """A column of a table as a Frictionless Table Schema field: name, type, Russian title and
    description, unit, constraints."""
    descriptor = {
        "name": field.name,
        "type": TYPES[field.type],
        "title": field.label_ru or field.name,
        "description": field.description_ru,
    }
    if field.type == "bool":
        descriptor["trueValues"], descriptor["falseValues"] = ["true"], ["false"]
    if field.unit:
        descriptor["unit"] = field.unit_label  # not in Table Schema's list, allowed as a custom property
    constraints = {}
    if field.required:
        constraints["required"] = True
    if field.allowed:
        constraints["enum"] = list(field.allowed)
    if table.kind == "source":  # bounds are rules the sources are validated against
        if field.min is not None and field.type in ("int", "float"):
            constraints["minimum"] = int(field.min) if field.type == "int" else field.min
        if field.max is not None and field.type in ("int", "float"):
            constraints["maximum"] = int(field.max) if field.type == "int" else field.max
    if constraints:
        descriptor["constraints"] = constraints
    return descriptor


def resource(table: Table, metadata: dict) -> dict:
    """One table's CSV as a Data Package resource; `metadata` is its metadata.json (sources, row count)."""
    foreign_keys = []
    for field in table.fields:
        if field.references:
            target, column = field.references.split(".")
            foreign_keys.append({"fields": field.name, "reference": {"resource": target, "fields": column}})
    schema = {
        "fields": [field_descriptor(f, table) for f in table.fields],
        "primaryKey": list(table.primary_key),
        "missingValues": [""],
    }
    if foreign_keys:
        schema["foreignKeys"] = foreign_keys
    return {
        "name": table.name,
        "path": f"{table.name}.csv",
        "profile": "tabular-data-resource",
        "title": table.title_ru,
        "description": table.description_ru,
        "format": "csv",
        "mediatype": "text/csv",
        "encoding": "utf-8-sig",
        "dialect": {"delimiter": ",", "header": True},
        "schema": schema,
        "sources": [{"title": s["title"], "path": s["url"]} for s in metadata["sources"] if s.get("url")],
        "x_row_count": metadata["row_count"],
    }


def package(metadata: dict[str, dict], licence: dict, created: str, text: dict, release: dict | None = None) -> dict:
    """The whole package; `metadata` maps every table's name to its metadata.json, `text` is package_text(),
    `release` the current release (releases.History.current: `version`, and `released_on` as `x_released_on`)."""
    described = {
        "profile": PROFILE,
        "name": "gpu-finetune-reference",
        "title": text["title"],
        "description": text["description"],
        "created": created,
    }
    if release is not None:
        described |= {"version": release["version"], "x_released_on": release["released_on"]}
    return described | {
        "licenses": [licence_entry(licence)],
        "resources": [resource(table, metadata[table.name]) for table in ALL_TABLES],
    }


def package_bytes(
    metadata: dict[str, dict], licence: dict, created: str, text: dict, release: dict | None = None
) -> bytes:
    """The datapackage.json file: `package(...)` as indented UTF-8 JSON."""
    described = package(metadata, licence, created, text, release)
    return (json.dumps(described, ensure_ascii=False, indent=2) + "\n").encode()
