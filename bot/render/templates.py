"""The one place Jinja environments are made: one loader over bot/templates, one environment per
kind of output, the kind read from the template's name.

- Markdown (`*.md.j2`: the status comment, help and command replies, written to GitLab): every
  printed value that is not `Markup` is user text made inert (bot/render/markdown.py's `inert`
  as `finalize`), the filters `code` and `inert`, the template's trailing newline kept.
- HTML (`pages/*.html.j2`: the dashboard): every printed value HTML-escaped, its hidden
  characters (bidi and other format characters, controls but the newline) shown as `[U+XXXX]`
  (`shown` as `finalize`), the filter `utc`.

Both are autoescaped and StrictUndefined (a missing name fails loudly), with trim_blocks and
lstrip_blocks. `finalize` and `keep_trailing_newline` belong to a whole environment, so each kind
has its own, made once by `environment` and cached. The loader serves a template only to the
environment of its kind: a Markdown template never renders without the inert rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any, assert_never

from jinja2 import Environment, FileSystemLoader, StrictUndefined, Template
from markupsafe import Markup

from bot.core.inert import show_hidden
from bot.render.markdown import code, inert

#: Where the templates live: `bot/templates`, package data in the wheel; in a checkout a link to
#: the repository's top-level templates/.
TEMPLATES_DIR = Path(__file__).resolve().parents[1] / "templates"
#: The environment attribute (set with `Environment.extend`) naming its kind.
_KIND_ATTRIBUTE = "gitops_template_kind"


class Kind(StrEnum):
    """A kind of output, named by the suffix of its templates."""

    MARKDOWN = ".md.j2"
    HTML = ".html.j2"


def kind_of(name: str) -> Kind:
    """The kind of the template `name`, by its suffix."""
    for kind in Kind:
        if name.endswith(kind.value):
            return kind
    raise ValueError(f"template {name!r} is neither Markdown (*.md.j2) nor HTML (*.html.j2)")


class _Loader(FileSystemLoader):
    """The templates directory, each template only for the environment of its kind."""

    def get_source(
        self, environment: Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        wanted = getattr(environment, _KIND_ATTRIBUTE, None)
        if wanted is not kind_of(template):
            raise ValueError(f"template {template!r} is not for the {wanted} environment")
        return super().get_source(environment, template)


#: The one loader every environment reads templates through.
LOADER = _Loader(str(TEMPLATES_DIR))


def utc(moment: datetime) -> str:
    """A moment as `YYYY-MM-DD HH:MM:SS` in UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def shown(value: Any) -> Any:
    """A printed text with every hidden character (U+202E, U+2066, `\\r`...) shown as
    `[U+XXXX]`: a page never reorders or hides what it prints. Anything else as it is."""
    if isinstance(value, Markup):
        return Markup(show_hidden(str(value)))
    return show_hidden(value) if isinstance(value, str) else value


@dataclass(frozen=True, slots=True)
class _Rules:
    """What sets one kind's environment apart."""

    #: applied to every printed value before autoescape
    finalize: Callable[[Any], Any] | None
    keep_trailing_newline: bool
    filters: Mapping[str, Callable[..., Any]]


def _rules(kind: Kind) -> _Rules:
    match kind:
        case Kind.MARKDOWN:
            return _Rules(
                finalize=inert, keep_trailing_newline=True, filters={"code": code, "inert": inert}
            )
        case Kind.HTML:
            return _Rules(finalize=shown, keep_trailing_newline=False, filters={"utc": utc})
        case _:
            assert_never(kind)


@cache
def environment(kind: Kind) -> Environment:
    """The environment for templates of `kind`; the only place the product makes one."""
    rules = _rules(kind)
    env = Environment(
        loader=LOADER,
        undefined=StrictUndefined,
        autoescape=True,
        finalize=rules.finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=rules.keep_trailing_newline,
    )
    env.filters.update(rules.filters)
    env.extend(**{_KIND_ATTRIBUTE: kind})
    return env


def get_template(name: str) -> Template:
    """The template `name` (relative to TEMPLATES_DIR) in the environment of its kind."""
    return environment(kind_of(name)).get_template(name)
