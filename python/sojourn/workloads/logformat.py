"""Access-log layouts: Common/Combined, an Apache ``LogFormat`` or an nginx ``log_format``.

A :class:`Layout` is the format read as fields and the literal text between them; lines
are cut into fields at that text, left to right (the way the servers write them), by
:func:`split` with polars' vectorised string kernels or, the same cuts, by the engine's
parser (crates/logparse, which reads the layout from ``importers._engine_layout``); then
each field sojourn uses is checked and converted by :mod:`sojourn.workloads.importers`.
Guarantees:

- :func:`layout` accepts a preset name (``common``, ``combined``), an Apache format
  (``%h %l %u %t \\"%r\\" %>s %b %D``: the directives of mod_log_config) or an nginx one
  (``$remote_addr - $remote_user [$time_local] "$request" ...``: the variables of
  ngx_http_log_module); anything else, a format without a time, request (or path),
  status or size, or two fields with nothing between them, is a :class:`LogFormatError`
  naming the directive and what is accepted.
- The default (:data:`DEFAULT`) is the Common prefix followed by anything: Combined's
  referer and user agent, and after them the first number is the response time
  (an integer is read as Apache's ``%D`` microseconds, a decimal as nginx's
  ``$request_time`` seconds; give a format for ``%T`` or other layouts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import takewhile

import polars as pl

# What sojourn does with a field (the trace column it feeds).
HOST, TIME, REQUEST, METHOD, PATH, STATUS, SIZE, RESPONSE, UPSTREAM, FORWARDED, IGNORED = (
    "host", "time", "request", "method", "path", "status", "size", "response_s", "upstream_response_s",
    "forwarded_for", "")
CLF_TIME = "%d/%b/%Y:%H:%M:%S %z"


class LogFormatError(ValueError):
    """A log format sojourn cannot read."""


@dataclass(frozen=True)
class Field:
    role: str
    directive: str
    # time: a strptime format or "epoch"; response times: seconds per logged unit.
    time_format: str = ""
    unit: float = 1.0


@dataclass(frozen=True)
class Layout:
    """Fields of a line and the literal text before each (``separators[0]`` opens the line)
    and after the last (``separators[-1]``); ``open_end``: anything may follow."""

    name: str
    fields: tuple[Field, ...]
    separators: tuple[str, ...]
    open_end: bool = False
    # Sub-second timestamps are placed as logged; 1-second ones are spread within their second.
    resolution_s: float = 1.0

    def roles(self) -> set[str]:
        return {f.role for f in self.fields}


# Apache mod_log_config: %[<>][!]NNN,NNN{param}X (condition and modifiers are accepted and ignored).
APACHE_DIRECTIVE = re.compile(r"%[<>]?(?:!?\d{3}(?:,\d{3})*)?(?:\{([^}]*)\})?([a-zA-Z%])")
NGINX_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
# %{unit}T (Apache 2.4.13+), in seconds per unit.
APACHE_T_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}
APACHE_EPOCH_T = {"sec": 1.0, "msec": 1e-3, "usec": 1e-6, "msec_frac": None, "usec_frac": None}


def _apache_field(param: str | None, letter: str, text: str) -> Field:
    param = param or ""
    if letter in "ha" and param in ("", "c"):
        return Field(HOST, text)
    if letter == "t":
        if not param:
            return Field(TIME, text, time_format=CLF_TIME)
        stripped = param.removeprefix("begin:").removeprefix("end:")
        if stripped in APACHE_EPOCH_T:
            if APACHE_EPOCH_T[stripped] is None:
                raise LogFormatError(f"{text}: a fraction of a second is not a time of its own; use %{{msec}}t or %t")
            return Field(TIME, text, time_format="epoch", unit=APACHE_EPOCH_T[stripped])
        return Field(TIME, text, time_format=stripped)
    if letter == "r":
        return Field(REQUEST, text)
    if letter == "m":
        return Field(METHOD, text)
    if letter == "U":
        return Field(PATH, text)
    if letter == "s":
        return Field(STATUS, text)
    if letter in "bB":
        return Field(SIZE, text)
    if letter == "D":
        return Field(RESPONSE, text, unit=1e-6)
    if letter == "T":
        if param not in APACHE_T_UNITS:
            raise LogFormatError(f"{text}: unknown unit {param!r}; accepted: %T, %{{s}}T, %{{ms}}T, %{{us}}T")
        return Field(RESPONSE, text, unit=APACHE_T_UNITS[param])
    if letter == "i" and param.lower() == "x-forwarded-for":
        return Field(FORWARDED, text)
    return Field(IGNORED, text)


NGINX_ROLES = {
    "remote_addr": Field(HOST, "$remote_addr"),
    "time_local": Field(TIME, "$time_local", time_format=CLF_TIME),
    "time_iso8601": Field(TIME, "$time_iso8601", time_format="%Y-%m-%dT%H:%M:%S%z"),
    "msec": Field(TIME, "$msec", time_format="epoch", unit=1.0),
    "request": Field(REQUEST, "$request"),
    "request_method": Field(METHOD, "$request_method"),
    "request_uri": Field(PATH, "$request_uri"),
    "uri": Field(PATH, "$uri"),
    "document_uri": Field(PATH, "$document_uri"),
    "status": Field(STATUS, "$status"),
    "body_bytes_sent": Field(SIZE, "$body_bytes_sent"),
    "request_time": Field(RESPONSE, "$request_time"),
    "upstream_response_time": Field(UPSTREAM, "$upstream_response_time"),
    "http_x_forwarded_for": Field(FORWARDED, "$http_x_forwarded_for"),
}


def _tokens(text: str) -> list[str | Field]:
    """The format as literal strings and fields, in order."""
    if "%" in text and APACHE_DIRECTIVE.search(text):
        # A format copied from httpd.conf keeps its escaped quotes.
        text = text.replace('\\"', '"').replace("\\t", "\t")
        pattern, make = APACHE_DIRECTIVE, lambda m: (
            "%" if m.group(2) == "%" else _apache_field(m.group(1), m.group(2), m.group(0)))
    elif NGINX_VARIABLE.search(text):
        pattern, make = NGINX_VARIABLE, lambda m: NGINX_ROLES.get(m.group(1) or m.group(2), Field(IGNORED, m.group(0)))
    else:
        raise LogFormatError(
            f"log format {text!r} has no Apache directive (%h, %t, ...) or nginx variable ($remote_addr, ...); "
            f"give one of those, or a preset: {', '.join(PRESETS)}")
    tokens: list[str | Field] = []
    at = 0
    for match in pattern.finditer(text):
        tokens.append(text[at:match.start()])
        field = make(match)
        # Apache's %t writes its own brackets: [10/Oct/2000:13:55:36 -0700].
        tokens.extend(["[", field, "]"] if match.group(0) == "%t" else [field])
        at = match.end()
    tokens.append(text[at:])
    # Merge literal pieces (and %% as a literal percent sign).
    merged: list[str | Field] = [""]
    for token in tokens:
        if isinstance(token, str) and isinstance(merged[-1], str):
            merged[-1] += token
        else:
            merged.append(token)
    if isinstance(merged[-1], Field):
        merged.append("")
    return merged


def parse(text: str, name: str | None = None) -> Layout:
    """The layout of an Apache LogFormat or nginx log_format string."""
    tokens = _tokens(text)
    fields: list[Field] = []
    separators: list[str] = [tokens[0]]
    for token in tokens[1:]:
        if isinstance(token, Field):
            if fields and separators[-1] == "":
                # %U%q: the query is dropped from paths anyway, so it joins the path.
                if fields[-1].role == PATH and token.directive == "%q":
                    continue
                raise LogFormatError(
                    f"log format {text!r}: {fields[-1].directive} and {token.directive} have nothing between them; "
                    f"sojourn cuts fields at the text between them (a space, a quote, ...)")
            fields.append(token)
            separators.append("")
        else:
            separators[-1] = token
    roles = [f.role for f in fields]
    needed = {TIME: "%t or $time_local", STATUS: "%>s or $status", SIZE: "%b or $body_bytes_sent",
              HOST: "%h or $remote_addr"}
    missing = [what for role, what in needed.items() if role not in roles]
    if REQUEST not in roles and PATH not in roles:
        missing.append('"%r" or "$request" (or a path: %U, $request_uri)')
    if missing:
        raise LogFormatError(f"log format {text!r} lacks {', '.join(missing)}: a trace needs each")
    twice = sorted({r for r in roles if r != IGNORED and roles.count(r) > 1})
    if twice:
        raise LogFormatError(f"log format {text!r} has more than one field for {', '.join(twice)}")
    time = fields[roles.index(TIME)]
    return Layout(name or text, tuple(fields), tuple(separators),
                  resolution_s=time.unit if time.time_format == "epoch" else 1.0)


PRESETS = {
    "common": '%h %l %u %t "%r" %>s %b',
    "combined": '%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"',
}
DEFAULT = Layout(
    "Common/Combined Log Format",
    parse(PRESETS["common"]).fields,
    parse(PRESETS["common"]).separators,
    open_end=True,
)


def layout(spec: str | None) -> Layout:
    """:data:`DEFAULT` for None, a preset by name, else the format string parsed."""
    if spec is None:
        return DEFAULT
    if spec in PRESETS:
        return parse(PRESETS[spec], name=spec)
    return parse(spec)


def split(frame: pl.DataFrame, layout: Layout) -> pl.DataFrame:
    """``frame`` (its ``line`` column) cut into the layout's fields: one column per used
    field, named by role; ``fits``: the line has all of the layout's text; for an open
    layout, ``rest``: what follows the last field."""
    first = layout.separators[0]
    line = pl.col("line")
    frame = frame.with_columns((pl.when(line.str.starts_with(first)).then(line.str.strip_prefix(first)) if first
                                else line).alias("rest"))
    # (column, the text after it); the last field of an open layout ends at a space.
    cuts = [(f.role or f"_ignored{i}", separator) for i, (f, separator) in enumerate(zip(layout.fields, layout.separators[1:]))]
    tail = cuts.pop()[0] if not cuts[-1][1] and not layout.open_end else None
    open_cut = layout.open_end and not cuts[-1][1]
    if open_cut:
        cuts[-1] = (cuts[-1][0], " ")
    at = 0
    while at < len(cuts):
        # Fields followed by the same text are cut in one pass; the remainder is a column
        # of its own (string views: no copy). Once a text is missing the remainder is
        # null, and so is every later one.
        run = [name for name, _ in takewhile(lambda cut: cut[1] == cuts[at][1], cuts[at:])]
        frame = frame.with_columns(pl.col("rest").str.splitn(cuts[at][1], len(run) + 1)
                                   .struct.rename_fields([*run, "rest"]).alias("rest")).unnest("rest")
        at += len(run)
    if tail is not None:
        frame = frame.with_columns(pl.col("rest").alias(tail),
                                   pl.when(pl.col("rest").is_not_null()).then(pl.lit("")).alias("rest"))
    elif open_cut:  # nothing after the last field is fine too
        frame = frame.with_columns(pl.when(pl.col(cuts[-1][0]).is_not_null()).then(pl.col("rest").fill_null("")))
    frame = frame.drop(f"_ignored{i}" for i, f in enumerate(layout.fields) if not f.role)
    fits = pl.col("rest").is_not_null() if layout.open_end else pl.col("rest") == ""
    frame = frame.with_columns(fits.fill_null(False).alias("fits"))
    return frame if layout.open_end else frame.drop("rest")
