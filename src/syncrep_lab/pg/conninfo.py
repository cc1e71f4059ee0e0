"""Connection strings that may carry a password, shown and stored without it.

libpq takes two forms, and both can hold a secret:

- ``key=value`` pairs, a value bare (up to white space, ``\\`` escaping the next
  character) or single-quoted (``'...'``, ``\\'`` and ``\\\\`` inside);
- URIs, ``postgresql://user:SECRET@host/db?password=SECRET&...``.

Wherever a conninfo can reach a terminal, a log, the store or a report it goes
through :func:`mask_conninfo` (the value of ``password`` and ``sslpassword``
becomes ``***``). The tokenizer follows libpq's ``conninfo_parse`` and
``conninfo_uri_parse``; a string that does not parse as either is masked by
pattern (:func:`mask_text`), which is also what free text (error messages) gets.
The real password stays in memory only: pgbench gets it through ``PGPASSWORD``
(:func:`split_password`), never on its command line.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any
from urllib.parse import unquote

MASK = "***"
SECRET_KEYS = frozenset({"password", "sslpassword"})
_URI_PREFIXES = ("postgresql://", "postgres://")

# Free text: `password=VALUE` (VALUE quoted, or up to white space, a quote or `&`)
# and a URI's `scheme://user:VALUE@`.
_KV_SECRET = re.compile(
    r"(?<![A-Za-z0-9_])((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s'\"&]*)",
    re.IGNORECASE,
)
_URI_SECRET = re.compile(r"(postgres(?:ql)?://[^\s:/@?#\"']*:)([^\s@/?#\"']*)(@)",
                         re.IGNORECASE)


class ConninfoSyntaxError(ValueError):
    """The text is neither libpq ``key=value`` pairs nor a postgresql:// URI."""


def is_uri(conninfo: str) -> bool:
    return conninfo.lstrip().lower().startswith(_URI_PREFIXES)


# --- key=value ---------------------------------------------------------------------


_WS = " \t\n\r\f\v"  # libpq's isspace() in the C locale: ASCII only


def _pairs(conninfo: str) -> list[tuple[str, str, int, int, int]]:
    """(key, unescaped value, start of the key, start and end of the value's text) of
    every pair, as libpq's conninfo_parse reads them."""
    out: list[tuple[str, str, int, int, int]] = []
    i, n = 0, len(conninfo)
    while i < n:
        if conninfo[i] in _WS:
            i += 1
            continue
        start = i
        while i < n and conninfo[i] != "=" and conninfo[i] not in _WS:
            i += 1
        key = conninfo[start:i]
        while i < n and conninfo[i] in _WS:
            i += 1
        if i >= n or conninfo[i] != "=":
            raise ConninfoSyntaxError(f'missing "=" after "{key}"')
        i += 1
        while i < n and conninfo[i] in _WS:
            i += 1
        vstart = i
        value: list[str] = []
        if i < n and conninfo[i] == "'":
            i += 1
            while True:
                if i >= n:
                    raise ConninfoSyntaxError("unterminated quoted string")
                ch = conninfo[i]
                if ch == "\\" and i + 1 < n:
                    value.append(conninfo[i + 1])
                    i += 2
                    continue
                if ch == "'":
                    i += 1
                    break
                value.append(ch)
                i += 1
        else:
            while i < n and conninfo[i] not in _WS:
                if conninfo[i] == "\\" and i + 1 < n:
                    value.append(conninfo[i + 1])
                    i += 2
                    continue
                value.append(conninfo[i])
                i += 1
        out.append((key, "".join(value), start, vstart, i))
    return out


# --- URIs --------------------------------------------------------------------------


def _uri_parts(conninfo: str) -> tuple[str, str | None, str, str]:
    """(scheme://, userinfo or None without '@', rest up to '?', query) of a URI."""
    lead = len(conninfo) - len(conninfo.lstrip())
    body = conninfo[lead:]
    prefix = next(p for p in _URI_PREFIXES if body.lower().startswith(p))
    scheme, rest = conninfo[: lead + len(prefix)], body[len(prefix):]
    # libpq looks for '@' before the first '/' or '?'
    end = len(rest)
    for stop in "/?":
        k = rest.find(stop)
        if k != -1:
            end = min(end, k)
    at = rest.rfind("@", 0, end)
    userinfo, rest = (rest[:at], rest[at + 1:]) if at != -1 else (None, rest)
    q = rest.find("?")
    main, query = (rest, "") if q == -1 else (rest[:q], rest[q + 1:])
    return scheme, userinfo, main, query


def _uri_join(scheme: str, userinfo: str | None, main: str, query: str) -> str:
    return (scheme + (userinfo + "@" if userinfo is not None else "") + main
            + ("?" + query if query else ""))


def _query_items(query: str) -> list[tuple[str, str]]:
    return [(item.partition("=")[0], item.partition("=")[2]) for item in query.split("&")
            if item]


# --- the API -----------------------------------------------------------------------


def mask_text(text: str) -> str:
    """Every ``password=...`` and URI password in free text replaced by ``***``."""
    text = _URI_SECRET.sub(lambda m: m.group(1) + MASK + m.group(3), text)
    return _KV_SECRET.sub(lambda m: m.group(1) + MASK, text)


def mask_conninfo(conninfo: str) -> str:
    """The conninfo with its password(s) shown as ``***``; everything else as written.

    >>> mask_conninfo("host=db1 password='a b' user=app")
    'host=db1 password=*** user=app'
    >>> mask_conninfo('postgresql://app:s3cret@db1:5432/bench')
    'postgresql://app:***@db1:5432/bench'
    """
    if is_uri(conninfo):
        scheme, userinfo, main, query = _uri_parts(conninfo)
        if userinfo is not None and ":" in userinfo:
            userinfo = userinfo.partition(":")[0] + ":" + MASK
        items = [(k, MASK if unquote(k).lower() in SECRET_KEYS else v)
                 for k, v in _query_items(query)]
        query = "&".join(f"{k}={v}" for k, v in items) if items else query
        return mask_text(_uri_join(scheme, userinfo, main, query))
    try:
        pairs = _pairs(conninfo)
    except ConninfoSyntaxError:
        return mask_text(conninfo)
    out, last = [], 0
    for key, _value, _kstart, start, end in pairs:
        if key.lower() in SECRET_KEYS:
            out.append(conninfo[last:start] + MASK)
            last = end
    out.append(conninfo[last:])
    return "".join(out)


def split_password(conninfo: str) -> tuple[str, str | None]:
    """The conninfo without its ``password``, and the password (None if it had none):
    the password goes to ``PGPASSWORD`` instead of a command line or a file.

    >>> split_password('host=db1 password=s3cret user=app')
    ('host=db1 user=app', 's3cret')
    >>> split_password('postgresql://app:s%40cret@db1/bench?sslmode=require')
    ('postgresql://app@db1/bench?sslmode=require', 's@cret')
    """
    if is_uri(conninfo):
        scheme, userinfo, main, query = _uri_parts(conninfo)
        password: str | None = None
        if userinfo is not None and ":" in userinfo:
            user, _, secret = userinfo.partition(":")
            password, userinfo = unquote(secret), user or None
        kept = []
        for k, v in _query_items(query):
            if unquote(k).lower() == "password":
                password = unquote(v)
            else:
                kept.append(f"{k}={v}")
        return _uri_join(scheme, userinfo, main, "&".join(kept)), password
    try:
        pairs = _pairs(conninfo)
    except ConninfoSyntaxError:
        return conninfo, None  # libpq will say what is wrong with it
    password = None
    out, last = [], 0
    for i, (key, value, kstart, _start, end) in enumerate(pairs):
        if key.lower() != "password":
            continue
        password = value
        cut_from, cut_to = kstart, end
        while cut_to < len(conninfo) and conninfo[cut_to] in _WS:  # the blanks after it
            cut_to += 1
        if cut_to == len(conninfo):  # the last pair: the blanks before it instead
            floor = max(last, pairs[i - 1][4] if i else 0)
            while cut_from > floor and conninfo[cut_from - 1] in _WS:
                cut_from -= 1
        out.append(conninfo[last:cut_from])
        last = cut_to
    out.append(conninfo[last:])
    return "".join(out), password


def without_masked_password(conninfo: str) -> str:
    """A stored (masked) conninfo made usable again: a ``***`` password is left out, so
    libpq takes the password from ``PGPASSWORD`` or ``~/.pgpass``."""
    rest, password = split_password(conninfo)
    return rest if password == MASK else conninfo


def has_secret(value: str) -> bool:
    return mask_conninfo(value) != value


# --- a spec's TOML text ------------------------------------------------------------

_TOML_TOKEN = re.compile(
    r"""(?P<comment>\#[^\n]*)
      | (?P<s>'''[\s\S]*?'''(?:'{1,2}(?!'))?
         | \"\"\"(?:[^\\]|\\[\s\S])*?\"\"\"(?:"{1,2}(?!"))?
         | "(?:[^"\\\n]|\\.)*"
         | '[^'\n]*')""",
    re.VERBOSE,
)


def _toml_string(value: str) -> str:
    """A TOML basic string holding ``value``."""
    out = []
    for ch in value:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _strings(data: Any) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [s for v in data.values() for s in _strings(v)] + [
            s for k in data for s in _strings(k)]
    if isinstance(data, list):
        return [s for v in data for s in _strings(v)]
    return []


def mask_toml(text: str) -> str:
    """The TOML document with every string that holds a password masked, comments and
    layout kept. Raises ValueError if the result would not be valid TOML or would
    still hold a password (the caller then refuses rather than store it)."""
    if not any(has_secret(s) for s in _strings(tomllib.loads(text))):
        return text

    def replace(m: re.Match[str]) -> str:
        token = m.group("s")
        if token is None:  # a comment: free text
            return mask_text(m.group(0))
        try:
            value = tomllib.loads(f"x = {token}")["x"]
        except tomllib.TOMLDecodeError:
            return token
        masked = mask_conninfo(value)
        return token if masked == value else _toml_string(masked)

    masked_text = _TOML_TOKEN.sub(replace, text)
    try:
        data = tomllib.loads(masked_text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"masking left invalid TOML: {exc}") from None
    if any(has_secret(s) for s in _strings(data)):
        raise ValueError("a password could not be masked")
    return masked_text


def require_parses(where: str, conninfo: str) -> None:
    """UserError naming ``where`` unless libpq would parse ``conninfo`` (the message
    shows no password)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from syncrep_lab.errors import UserError

    try:
        conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        raise UserError(f"{where}: {mask_text(str(exc).strip())}",
                        "write key=value pairs (host=H port=P dbname=D, a value with "
                        "spaces in single quotes) or a postgresql:// URI") from None
