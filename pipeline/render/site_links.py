"""Links the published files carry: Markdown for the CMS with absolute links under an absolute base
URL, the warning when the base URL is relative, and deep links into the calculator."""

from __future__ import annotations

import re
from urllib.parse import urlencode

from pipeline.messages import message

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a no-change build needs none)
if TYPE_CHECKING:  # imported where used: `build` checks its base URL here before the no-change check
    from markupsafe import Markup

    from pipeline.problems import Problem

# The calculator's URL parameters (the `name` of its fields, read back by calculator.js).
CALCULATOR_FIELDS = (
    *("model", "params", "method", "gpu", "server", "advanced", "optimizer", "seq_len", "micro_batch"),
    *("grad_accum", "gpus", "sharding", "offload", "lora_rank", "lora_targets", "grad_checkpointing"),
    *("flash_attention", "loss", "fp8", "tokens", "epochs", "util", "cards"),
)
# A Markdown link or image target that is relative: not a scheme, not an anchor, not a root path.
_RELATIVE_TARGET = re.compile(r"(\]\()(?![a-zA-Z][a-zA-Z0-9+.-]*:|#|/)([^)\s]+)(\))")


# Where the site may be served (--base-url): an http(s) address with a host, or a path from the root;
# only characters that need no escaping in HTML, XML, robots.txt or Markdown. A scheme such as
# "javascript:" or a host-relative "//other.example" never reaches a canonical link or 404.html.
_PATH_CHARACTERS = r"[A-Za-z0-9._~%+@:/-]*"
_BASE_URL = re.compile(
    rf"(?:https?://[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{{1,5}})?(?:/{_PATH_CHARACTERS})?|/{_PATH_CHARACTERS})",
    re.IGNORECASE,
)


def check_base_url(base_url: object) -> str:
    """`base_url` when it is one a site may be served at, else ValueError in the editor's words."""
    text = base_url if isinstance(base_url, str) else ""
    path = re.sub(r"^https?://[^/]*", "", text, flags=re.IGNORECASE)
    if not _BASE_URL.fullmatch(text) or "//" in path or len(text) > 2000:
        raise ValueError(message("config.base_url", value=str(base_url)[:80]))
    return text


def is_absolute(base_url: str) -> bool:
    """Whether the site's base URL is absolute (http or https with a host), as canonical links and the sitemap need."""
    return bool(re.match(r"https?://[^/\s]+", base_url))


def absolute_markdown(text: str, base_url: str) -> str:
    """Every relative link of a Markdown text made absolute under `base_url` (which ends with "/"),
    so that the text works wherever the CMS shows it. A relative base leaves the text as it is."""
    if not is_absolute(base_url):
        return text
    return _RELATIVE_TARGET.sub(lambda m: m[1] + base_url + m[2] + m[3], text)


def base_url_warning(base_url: str) -> list[Problem]:
    """The warning of a build without an absolute --base-url."""
    if is_absolute(base_url):
        return []
    from pipeline.problems import Problem

    return [
        Problem(
            "--base-url",
            0,
            "",
            None,
            message("articles.base_url_relative", base_url=base_url),
        )
    ]


def calculator_url(**fields) -> Markup:
    """A link into the calculator with its fields filled in: calculator_url(model="generic-70b",
    method="lora") -> "calculator.html?method=lora&model=generic-70b". Booleans become "1". The query
    is percent-encoded, so the link passes into an article's Markdown as it is (Markup)."""
    unknown = sorted(set(fields) - set(CALCULATOR_FIELDS))
    if unknown:
        raise KeyError(
            message("articles.calculator_fields", fields=", ".join(unknown), known=", ".join(CALCULATOR_FIELDS))
        )
    from markupsafe import Markup

    query = {k: ("1" if v is True else str(v)) for k, v in sorted(fields.items()) if v not in (None, False, "")}
    return Markup("calculator.html" + ("?" + urlencode(query) if query else ""))
