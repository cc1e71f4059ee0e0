"""``synchronous_standby_names``: a tokenizer and parser following PostgreSQL's own
(src/backend/replication/syncrep_scanner.l and syncrep_gram.y), never string splitting.

Accepted forms (from 10 on; 9.6 has only the first two)::

    standby_list                  FIRST 1 of the list, by priority
    NUM ( standby_list )          FIRST NUM
    FIRST NUM ( standby_list )
    ANY NUM ( standby_list )      quorum

>>> parse("1(b,c)")
SyncSpec(method='first', num_sync=1, names=('b', 'c'))
>>> parse('ANY 2 (b, "C d", *)')
SyncSpec(method='any', num_sync=2, names=('b', 'C d', '*'))
>>> parse("b, c").render()
'FIRST 1 (b, c)'
>>> parse("") is None
True
>>> expected_states(parse("1(b,c)"), ["b", "c"])
{'b': 'sync', 'c': 'potential'}
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Literal

from syncrep_lab.errors import UserError

Method = Literal["first", "any"]

# syncrep_scanner.l: ident_start [A-Za-z\200-\377_], ident_cont adds digits and $.
_IDENT_START = r"A-Za-z_\u0080-\U0010ffff"
_TOKEN_RE = re.compile(
    rf"""
    (?P<space>[ \t\n\r\f\v]+)
  | (?P<quoted>"(?:[^"]|"")*")
  | (?P<ident>[{_IDENT_START}][{_IDENT_START}0-9$]*)
  | (?P<num>[0-9]+)
  | (?P<star>\*)
  | (?P<punct>[,()])
    """,
    re.VERBOSE,
)


class SyncNamesError(UserError):
    def __init__(self, text: str, reason: str) -> None:
        super().__init__(
            f"synchronous_standby_names {text!r} does not parse: {reason}",
            "use a list (b, c), 'N (b, c)', 'FIRST N (b, c)' or 'ANY N (b, c)'",
        )
        self.reason = reason


@dataclass(frozen=True)
class Token:
    kind: str  # NAME, NUM, ANY, FIRST, ',', '(', ')'
    value: str


@dataclass(frozen=True)
class SyncSpec:
    method: Method
    num_sync: int
    names: tuple[str, ...]

    def render(self) -> str:
        """A canonical text PostgreSQL (10+) parses back to the same spec."""
        return f"{self.method.upper()} {self.num_sync} ({', '.join(map(quote, self.names))})"

    def render_for(self, server_version_num: int) -> str:
        """The text for a given server: 9.6 knows neither FIRST nor ANY."""
        if server_version_num < 100000:
            if self.method == "any":
                raise UserError(
                    "ANY (quorum commit) needs PostgreSQL 10 or newer",
                    "use 'N (names)' (priority) on 9.6",
                )
            return f"{self.num_sync} ({', '.join(map(quote, self.names))})"
        return self.render()

    def matches(self, standby: str) -> bool:
        return any(n == "*" or n.lower() == standby.lower() for n in self.names)


def quote(name: str) -> str:
    """Quote a standby name when it would not scan back as the same plain NAME."""
    if name == "*":
        return name
    if re.fullmatch(rf"[{_IDENT_START}][{_IDENT_START}0-9$]*", name) and name.lower() not in (
        "any",
        "first",
    ):
        return name
    if re.fullmatch(r"[0-9]+", name):
        return name
    return '"' + name.replace('"', '""') + '"'


def tokenize(text: str, *, version_num: int = 180000) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise SyncNamesError(text, f"unexpected character {text[pos]!r} at {pos + 1}")
        pos = m.end()
        kind = m.lastgroup
        value = m.group()
        if kind == "space":
            continue
        if kind == "quoted":
            inner = value[1:-1].replace('""', '"')
            # "" is a (useless) empty name: the servers accept it, so do we.
            tokens.append(Token("NAME", inner))
        elif kind == "ident":
            upper = value.upper()
            if version_num >= 100000 and upper in ("ANY", "FIRST"):
                tokens.append(Token(upper, value))
            else:
                tokens.append(Token("NAME", value))
        elif kind == "num":
            tokens.append(Token("NUM", value))
        elif kind == "star":
            tokens.append(Token("NAME", "*"))
        else:
            tokens.append(Token(value, value))
    return tokens


class _Parser:
    def __init__(self, text: str, tokens: list[Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.i = 0

    def peek(self, offset: int = 0) -> Token | None:
        j = self.i + offset
        return self.tokens[j] if j < len(self.tokens) else None

    def take(self, *kinds: str) -> Token:
        tok = self.peek()
        if tok is None or tok.kind not in kinds:
            found = "end of input" if tok is None else repr(tok.value)
            raise SyncNamesError(self.text, f"expected {' or '.join(kinds)}, found {found}")
        self.i += 1
        return tok

    def standby_list(self) -> tuple[str, ...]:
        names = [self.take("NAME", "NUM").value]
        while (tok := self.peek()) is not None and tok.kind == ",":
            self.i += 1
            names.append(self.take("NAME", "NUM").value)
        return tuple(names)

    def number(self) -> int:
        value = int(self.take("NUM").value)
        if value <= 0:
            raise SyncNamesError(
                self.text, f"number of synchronous standbys ({value}) must be greater than zero"
            )
        return value

    def parse(self) -> SyncSpec:
        first = self.peek()
        assert first is not None
        method: Method = "first"
        if first.kind in ("ANY", "FIRST"):
            self.i += 1
            method = "any" if first.kind == "ANY" else "first"
            num = self.number()
            names = self.parenthesised()
        elif first.kind == "NUM" and (nxt := self.peek(1)) is not None and nxt.kind == "(":
            num = self.number()
            names = self.parenthesised()
        else:
            num, names = 1, self.standby_list()
        if (extra := self.peek()) is not None:
            raise SyncNamesError(self.text, f"unexpected {extra.value!r} after the list")
        return SyncSpec(method, num, names)

    def parenthesised(self) -> tuple[str, ...]:
        self.take("(")
        names = self.standby_list()
        self.take(")")
        return names


def parse(text: str, *, version_num: int = 180000) -> SyncSpec | None:
    """Parse as a server of ``version_num`` would; None for '' (asynchronous).

    >>> parse('1(b,c)')
    SyncSpec(method='first', num_sync=1, names=('b', 'c'))
    >>> parse('ANY 2 (b, c, d)')
    SyncSpec(method='any', num_sync=2, names=('b', 'c', 'd'))
    >>> parse('') is None
    True
    >>> parse('FIRST 1 (b, c)').render_for(90600)  # 9.6 has no FIRST: the same meaning
    '1 (b, c)'
    >>> parse('1(b,')  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    syncrep_lab.pg.sync_names.SyncNamesError: ... expected NAME or NUM, found end of input
      fix: use a list (b, c), 'N (b, c)', 'FIRST N (b, c)' or 'ANY N (b, c)'
    """
    if text == "":
        return None
    tokens = tokenize(text, version_num=version_num)
    if not tokens:  # only the empty string means asynchronous; blanks do not parse
        raise SyncNamesError(text, "nothing but white space")
    return _Parser(text, tokens).parse()


# A standby whose state PostgreSQL decides by something other than names: among standbys
# of equal priority (several matching '*') it takes them in walsender slot order, the
# order in which they connected.
EITHER = "sync or potential"


def state_ok(expected: str, got: str | None) -> bool:
    return got == expected or (expected == EITHER and got in ("sync", "potential"))


@dataclass(frozen=True)
class Expected:
    """What the primary should show once every standby is streaming: each standby's
    ``sync_state`` where the names determine it (EITHER where they do not), and how
    many are ``sync`` in all (FIRST; None for ANY and for asynchronous)."""

    states: dict[str, str]
    sync: int | None

    @property
    def synchronous(self) -> int:
        """Standbys whose confirmation a commit can count on: sync and quorum ones."""
        return (self.sync or 0) + sum(1 for s in self.states.values() if s == "quorum")

    def met(self, seen: dict[str, str]) -> bool:
        """Whether the sync states ``seen`` (standby -> sync_state) are these."""
        if not all(state_ok(state, seen.get(name)) for name, state in self.states.items()):
            return False
        return self.sync is None or sum(
            1 for name in self.states if seen.get(name) == "sync") == self.sync


def expect(spec: SyncSpec | None, standbys: list[str]) -> Expected:
    """The ``sync_state`` the primary should show for each connected standby.

    FIRST: by priority (position in the list, '*' matching any name not listed
    before it), the first ``num_sync`` matching standbys are 'sync' and the other
    matching ones 'potential'; where the ``num_sync`` boundary falls inside a group of
    equal priority, which of the group are 'sync' is not the names' to say (EITHER),
    only how many. ANY: every matching standby is 'quorum'. Standbys that match no
    name are 'async'.

    >>> expect(parse('1(b,c)'), ['b', 'c', 'd'])
    Expected(states={'b': 'sync', 'c': 'potential', 'd': 'async'}, sync=1)
    >>> expect(parse('2(*)'), ['s1', 's2', 's3']).states['s1']
    'sync or potential'
    >>> expect(parse('ANY 1 (b, c)'), ['b', 'c']).synchronous
    2
    """
    states = {name: "async" for name in standbys}
    if spec is None:
        return Expected(states, None)
    matching = [s for s in standbys if spec.matches(s)]
    if spec.method == "any":
        return Expected({**states, **{s: "quorum" for s in matching}}, None)

    def priority(standby: str) -> int:
        for idx, name in enumerate(spec.names):
            if name == "*" or name.lower() == standby.lower():
                return idx + 1
        raise AssertionError(standby)

    ranked = sorted(matching, key=priority)
    n = spec.num_sync
    split = (priority(ranked[n - 1]) if len(ranked) > n
             and priority(ranked[n - 1]) == priority(ranked[n]) else None)
    for rank, standby in enumerate(ranked):
        states[standby] = (EITHER if priority(standby) == split
                           else "sync" if rank < n else "potential")
    return Expected(states, min(n, len(matching)))


def expected_states(spec: SyncSpec | None, standbys: list[str]) -> dict[str, str]:
    """Each standby's expected ``sync_state`` (see :func:`expect`)."""
    return expect(spec, standbys).states


# --- standby names and a sync text for a cluster --------------------------------------
# The rules both `cluster up` (its flags) and a spec's check (its keys) apply.

# usable as an application_name (an identifier PostgreSQL folds to lower case) and as
# the standby's directory name
_NAME_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def default_standby_names(count: int) -> list[str]:
    """b, c, d, ...: the seed's names, for as many standbys as asked.

    >>> default_standby_names(3)
    ['b', 'c', 'd']
    """
    return list(string.ascii_lowercase[1 : 1 + count])


def check_standby_names(given: list[str], standbys: int, where: str) -> list[str]:
    """Standby names as a cluster can use them (lower case): one per standby, usable as a
    directory and an application_name, distinct. ``where`` names them in messages
    (``--names``, or a spec's ``names``)."""
    names = [n.strip().lower() for n in given]
    if len(names) != standbys:
        raise UserError(f"{where} gives {len(names)} names for {standbys} standbys",
                        "give one name per standby, or leave them out")
    for name in names:
        if not _NAME_RE.fullmatch(name) or name == "primary" or name == "sock":
            raise UserError(
                f"standby name {name!r} is not usable",
                "use lowercase letters, digits and _ (not 'primary' or 'sock')",
            )
    if len(set(names)) != len(names):
        raise UserError("standby names repeat", "give each standby its own name")
    return names


def check_sync(
    text: str, standbys: list[str], version_num: int
) -> tuple[SyncSpec | None, str]:
    """Parse ``--sync`` for this server version and check it fits the cluster.

    Returns the parsed spec and the text to write into postgresql.conf.
    """
    try:
        spec = parse(text, version_num=version_num)
    except SyncNamesError:
        if version_num >= 100000:
            raise
        # 9.6 knows neither FIRST nor ANY. 'FIRST N (...)' means exactly 9.6's
        # 'N (...)', so one spec serves every version; ANY has no 9.6 equivalent
        # and render_for() refuses it.
        spec = parse(text)
    if spec is None:
        return None, ""
    rendered = spec.render_for(version_num)
    matching = [s for s in standbys if spec.matches(s)]
    if not matching:
        raise UserError(
            f"synchronous_standby_names {text!r} names no standby of this cluster "
            f"(standbys: {', '.join(standbys) or 'none'}); every commit would wait forever",
            "name the standbys (e.g. --sync '1(b,c)'), or use --sync '' for asynchronous",
        )
    if spec.num_sync > len(matching):
        raise UserError(
            f"synchronous_standby_names {text!r} needs {spec.num_sync} synchronous standbys "
            f"but only {len(matching)} of this cluster match ({', '.join(matching)}); "
            "every commit would wait forever",
            "lower the number or add standbys (--standbys)",
        )
    return spec, rendered
