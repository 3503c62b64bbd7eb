"""Colours, shapes and label text for drawn nodes: stable, escaped, never failing."""

from __future__ import annotations

import hashlib
import html

import graphviz

__all__ = ["KIND_STYLES", "html_label", "palette_colour", "tooltip_text", "visible"]

# Pastel fills that read in light and dark themes behind dark text.
_PALETTE = (
    "#cfe3f7", "#f9d9b8", "#d5ecc9", "#f3c9d3", "#e1d5f2", "#f6efb4",
    "#c8ece9", "#f2d4c4", "#dfe7c1", "#d9dcf5", "#f0cfe8", "#cde8dc",
)  # fmt: skip

# kind -> (shape, base style, fill when the kind, not the target, decides the colour)
KIND_STYLES: dict[str, tuple[str, str, str | None]] = {
    "placeholder": ("house", "filled", "#c7eac2"),
    "output": ("invhouse", "filled", "#c7eac2"),
    "get_attr": ("box", "rounded,filled,dashed", "#eeeeee"),
    "parameter": ("box", "rounded,filled,dashed", "#eeeeee"),
    "buffer": ("box", "rounded,filled,dashed", "#e4e4e4"),
    "constant": ("box", "rounded,filled,dotted", "#f4f4f4"),
    "call_function": ("box", "rounded,filled", None),
    "call_method": ("box", "rounded,filled,diagonals", None),
    "call_module": ("box3d", "filled", None),
    "module": ("folder", "filled", "#fdf3d6"),  # a collapsed module
    "stub": ("note", "filled,dashed", "#f4f4f4"),  # a copy of a widely used input
    "collective": ("cds", "filled,bold", "#ffc98b"),  # talks to other ranks (torch.distributed)
}


def palette_colour(key: str) -> str:
    """The same key always gets the same pastel colour."""
    digest = hashlib.sha1(key.encode("utf-8", "surrogatepass")).digest()
    return _PALETTE[digest[0] % len(_PALETTE)]


def visible(text: str) -> str:
    r"""``text`` with every invisible or direction-changing character shown as an escape.

    Bidi overrides (U+202E), zero-width characters, control characters and lone
    surrogates could make a name look like another one (or fail to encode); newlines
    stay, carriage returns go, a tab becomes a space.

        >>> visible("evil\u202egnp.exe"), visible("a\u200bb"), visible("\ud800")
        ('evil\\u202egnp.exe', 'a\\u200bb', '\\ud800')
        >>> visible("a\tb\r\nc\u200b")
        'a b\nc\\u200b'
    """
    text = str(text)
    if text.isprintable():
        return text
    text = text.replace("\r", "").replace("\t", " ")
    if text.replace("\n", "").isprintable():  # a tooltip's lines: checked at C speed
        return text
    return "".join(_visible_char(ch) for ch in text)


def _visible_char(ch: str) -> str:
    if ch.isprintable() or ch in "\n ":
        return ch
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _clean(text: str, limit: int) -> str:
    text = visible(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def html_label(title: str, lines: list[str], *, bold: str = "", limit: int = 40) -> str:
    """An HTML-like DOT label; every piece of text is escaped (quotes, ``<``, ``\\l``...)."""
    parts = []
    if bold:
        parts.append(f"<B>{_escape_lines(bold, limit)}</B>")
    parts.append(_escape_lines(title, limit))
    parts.extend(f'<FONT POINT-SIZE="10">{_escape_lines(line, limit)}</FONT>' for line in lines)
    return "<" + "<BR/>".join(parts) + ">"


def _escape_lines(text: str, limit: int) -> str:
    # Graphviz expands \N, \G, \l... even inside HTML labels (entities too), so a
    # backslash is shown as the look-alike U+29F5; tooltips keep the exact text.
    return "<BR/>".join(
        html.escape(_clean(line, limit).replace("\\", "\u29f5"))
        for line in str(text).split("\n")[:4]
    )


def tooltip_text(text: str, limit: int = 2000) -> str:
    """A DOT string attribute: newlines kept as line breaks, quoting left to the graphviz
    package. Graphviz expands ``\\N``/``\\G`` even when the backslash is escaped, so a
    backslash is shown as the look-alike U+29F5 (the exact text stays in Python)."""
    clean = visible(text)[:limit].replace("\\", "\u29f5")
    return graphviz.nohtml(clean.replace("\n", "\\n"))
