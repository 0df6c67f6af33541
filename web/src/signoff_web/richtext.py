"""Model-written markdown (assistant messages, pause-point descriptions) as safe HTML.

Raw HTML is escaped, images are off and ``javascript:``-like links are refused (markdown-it's
own validation). Links are where a model steered by what it read can still mislead: "[your
refund](https://evil.example)" looks like ours. So a link to another site is never live here:
it points at the web's own ``/leave`` page, which shows the full destination and asks before
going, and the destination itself is printed beside the link text (as markdown-it normalised
it: an internationalised host as punycode, so a look-alike name shows as what it is). A
same-site path (``/chat/…``, ``#…``) stays a plain link.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlsplit

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup, escape

LEAVE_PATH = "/leave"
#: what the ``/leave`` page offers to open; anything else is shown, never linked
OPENABLE_SCHEMES = frozenset({"http", "https", "mailto"})


def same_site(href: str) -> bool:
    """A path on this site: ``/x`` or ``#x`` (never ``//host`` or a backslash trick)."""
    if href.startswith("#"):
        return True
    return href.startswith("/") and not href.startswith("//") and "\\" not in href


def leave_url(href: str) -> str:
    return f"{LEAVE_PATH}?to={quote(href, safe='')}"


def openable(href: str) -> bool:
    parts = urlsplit(href)
    if parts.scheme.lower() not in OPENABLE_SCHEMES:
        return False
    return parts.scheme.lower() == "mailto" or bool(parts.netloc)


def _link_open(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    href = str(token.attrGet("href") or "")
    outside: list[str | None] = env.setdefault("signoff_links", [])
    if same_site(href):
        outside.append(None)
    else:
        # an autolink's text is already the destination: printing it twice says nothing more
        text = tokens[idx + 1] if idx + 1 < len(tokens) else None
        shows_itself = text is not None and text.type == "text" and text.content == href
        outside.append("" if shows_itself else href)
        token.attrSet("href", leave_url(href))
        token.attrSet("rel", "nofollow noopener noreferrer")
        token.attrSet("class", "outside")
    return self.renderToken(tokens, idx, options, env)


def _link_close(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    closed = self.renderToken(tokens, idx, options, env)
    outside: list[str | None] = env.get("signoff_links", [])
    href = outside.pop() if outside else None
    if not href:
        return closed
    return f'{closed} <span class="destination">({escape(href)})</span>'


_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).disable(["image"])
_md.add_render_rule("link_open", _link_open)
_md.add_render_rule("link_close", _link_close)


def markdown(text: str | None) -> Markup:
    """Model-written text as safe markdown (see the module's docstring)."""
    env: dict[str, Any] = {}
    return Markup(_md.render(text or "", env))  # noqa: S704 — html disabled: output is escaped
