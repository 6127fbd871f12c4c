"""The quote request (labels.toml names it): a plain link (no JavaScript) that carries a configuration to the sales contact.

site_templates/site.toml [quote] holds the contacts: `email` (a mailto: link with a subject and a
body) and, when set, `form_url` (the configuration goes as query parameters instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote, urlencode


def quote_url(contacts: Mapping[str, str], subject: str, lines: list[tuple[str, str]]) -> str:
    """The link of the quote request: the form URL with the fields, or a mailto: with subject and body."""
    form = str(contacts.get("form_url") or "")
    if form:
        return form + ("&" if "?" in form else "?") + urlencode([("subject", subject), *lines])
    body = "\n".join(f"{name}: {value}" for name, value in lines)
    return f"mailto:{contacts['email']}?subject={quote(subject)}&body={quote(body)}"
