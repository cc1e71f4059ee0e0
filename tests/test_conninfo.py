"""Passwords in connection strings: masked wherever shown or stored, both forms.

libpq itself (``psycopg.conninfo.conninfo_to_dict``, i.e. PQconninfoParse) is the
oracle: a masked string must parse to the same options with the password ``***``,
and the string without its password to the same options without it.
"""

from __future__ import annotations

import tomllib
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from syncrep_lab.pg.conninfo import (
    MASK,
    mask_conninfo,
    mask_text,
    mask_toml,
    split_password,
    without_masked_password,
)


@pytest.mark.parametrize(
    ("conninfo", "masked"),
    [
        ("host=/tmp port=5432 password=secret user=u", "host=/tmp port=5432 password=*** user=u"),
        ("password=secret", "password=***"),
        ("host=x password = 'two words' dbname=d", "host=x password = *** dbname=d"),
        (r"host=x password='it\'s \\ here' dbname=d", "host=x password=*** dbname=d"),
        (r"password=back\ slash host=x", "password=*** host=x"),
        ("host=x PASSWORD=upper", "host=x PASSWORD=***"),
        ("sslpassword=key host=x", "sslpassword=*** host=x"),
        ("host=x port=5432", "host=x port=5432"),
        ("", ""),
        ("postgresql://u:secret@host:5432/db", "postgresql://u:***@host:5432/db"),
        ("postgres://u:secret@h1:1,h2:2/db", "postgres://u:***@h1:1,h2:2/db"),
        ("postgresql://u:p%40ss@[::1]:5/db", "postgresql://u:***@[::1]:5/db"),
        ("postgresql://:secret@h/db", "postgresql://:***@h/db"),
        ("postgresql://u@h/db?password=secret&sslmode=disable",
         "postgresql://u@h/db?password=***&sslmode=disable"),
        ("postgresql:///db?host=%2Ftmp&password=secret", "postgresql:///db?host=%2Ftmp&password=***"),
        ("postgresql://u:a@b@h/db", "postgresql://u:***@h/db"),
        ("POSTGRESQL://u:secret@h", "POSTGRESQL://u:***@h"),
        ("postgresql://h/db", "postgresql://h/db"),
        # not a conninfo libpq takes: masked by pattern all the same
        ("host=x password", "host=x password"),
        ("password='unterminated", "password=***"),
    ],
)
def test_mask_conninfo(conninfo: str, masked: str) -> None:
    assert mask_conninfo(conninfo) == masked
    assert mask_conninfo(masked) == masked  # masking twice changes nothing


@pytest.mark.parametrize(
    ("conninfo", "rest", "password"),
    [
        ("host=/tmp password=secret port=5", "host=/tmp port=5", "secret"),
        (r"host=x password = 'it\'s here'", "host=x", "it's here"),
        ("host=x", "host=x", None),
        ("postgresql://u:p%40ss@h:5/db", "postgresql://u@h:5/db", "p@ss"),
        ("postgresql://u@h/db?password=s%20t&sslmode=disable",
         "postgresql://u@h/db?sslmode=disable", "s t"),
        ("postgresql://:secret@h/db", "postgresql://h/db", "secret"),
        ("postgresql://h/db", "postgresql://h/db", None),
    ],
)
def test_split_password(conninfo: str, rest: str, password: str | None) -> None:
    assert split_password(conninfo) == (rest, password)
    if password is not None:
        assert conninfo_to_dict(rest) == {k: v for k, v in conninfo_to_dict(conninfo).items()
                                          if k != "password"}


def test_without_masked_password() -> None:
    assert without_masked_password("host=x password=*** port=5") == "host=x port=5"
    assert without_masked_password("postgresql://u:***@h/db") == "postgresql://u@h/db"
    assert without_masked_password("host=x password=real") == "host=x password=real"


def test_mask_text() -> None:
    text = ('connection to "host=x password=abc" failed; see postgresql://u:pw@h/d and '
            "password='a b' or ?password=q&x=1")
    masked = mask_text(text)
    for secret in ("abc", ":pw@", "'a b'", "=q&"):
        assert secret not in masked
    assert masked.count(MASK) == 4


values = st.text(st.characters(codec="utf-8", blacklist_characters="\x00"),
                 max_size=12)
PASSWORD = "Pw-Secret-9f3b"


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["host", "port", "dbname", "user",
                                        "application_name", "options", "sslmode"]),
                       values, max_size=5),
       st.text(st.characters(codec="utf-8", blacklist_characters="\x00"),
               min_size=1, max_size=16))
def test_masked_key_value_parses_like_libpq(options: dict[str, str], password: str) -> None:
    """make_conninfo quotes as libpq wants (spaces, quotes, backslashes); the masked
    string parses to the same options with password ***, and holds no password."""
    conninfo = make_conninfo(**options, password=PASSWORD + password)
    masked = mask_conninfo(conninfo)
    assert conninfo_to_dict(masked) == {**conninfo_to_dict(conninfo), "password": MASK}
    assert PASSWORD not in masked
    rest, found = split_password(conninfo)
    assert found == PASSWORD + password
    assert conninfo_to_dict(rest) == {k: v for k, v in conninfo_to_dict(conninfo).items()
                                      if k != "password"}


@settings(max_examples=200, deadline=None, database=None)
@given(values.filter(lambda u: len(u) <= 8), values,
       st.sampled_from(["userinfo", "query", "both"]))
def test_masked_uri_parses_like_libpq(user: str, password: str, where: str) -> None:
    secret = PASSWORD + password
    userinfo = quote(user, safe="") + (":" + quote(secret, safe="") if where != "query"
                                       else "")
    query = "?application_name=x" + ("&password=" + quote(secret, safe="")
                                      if where != "userinfo" else "")
    uri = f"postgresql://{userinfo}@localhost:5432/db{query}"
    masked = mask_conninfo(uri)
    assert PASSWORD not in masked
    parsed = conninfo_to_dict(masked)
    assert parsed["password"] == MASK
    assert {k: v for k, v in parsed.items() if k != "password"} == {
        k: v for k, v in conninfo_to_dict(uri).items() if k != "password"}
    rest, found = split_password(uri)
    assert found == secret
    assert "password" not in conninfo_to_dict(rest)


SPEC = """\
name = "attach" # password=in-a-comment
description = 'free text stays as it is: a [bracket] and "quotes"'

[topology.attach]
primary = "host=/tmp port=5432 password=se\\\\cr\\"et1 dbname=postgres"
standbys = { b = 'postgresql://u:secret2@h/db', c = \"\"\"
host=/tmp password='secret 3'\"\"\" }
allow_alter = false

[settings]
work_mem = "4MB"
"""


def test_mask_toml_keeps_the_document() -> None:
    masked = mask_toml(SPEC)
    for secret in ("se\\\\cr", "secret2", "secret 3", "in-a-comment"):
        assert secret not in masked, masked
    data, original = tomllib.loads(masked), tomllib.loads(SPEC)
    attach: dict[str, Any] = data["topology"]["attach"]
    assert attach["primary"] == "host=/tmp port=5432 password=*** dbname=postgres"
    assert attach["standbys"] == {"b": "postgresql://u:***@h/db",
                                  "c": "host=/tmp password=***"}
    assert {k: v for k, v in data.items() if k != "topology"} == {
        k: v for k, v in original.items() if k != "topology"}
    assert masked.splitlines()[1] == SPEC.splitlines()[1]  # layout kept line by line
    assert mask_toml(masked) == masked
    assert mask_toml("name = 'plain'\n") == "name = 'plain'\n"


def test_mask_toml_refuses_what_it_cannot_mask() -> None:
    # two keys that differ only in their passwords become the same key once masked
    with pytest.raises(ValueError, match="invalid TOML"):
        mask_toml('[x]\n"password=a" = 1\n"password=b" = 2\n')


@settings(max_examples=200, deadline=None, database=None)
@given(st.text(st.characters(codec="utf-8"), min_size=1, max_size=10),
       st.sampled_from(["basic", "literal", "multi"]))
def test_mask_toml_any_password(password: str, form: str) -> None:
    conninfo = make_conninfo(host="/tmp", password=PASSWORD + password.replace("\x00", ""))
    if form == "basic":
        token = '"' + conninfo.replace("\\", "\\\\").replace('"', '\\"') + '"'
    elif form == "literal" and "'" not in conninfo and "\n" not in conninfo:
        token = "'" + conninfo + "'"
    else:
        token = '"""' + conninfo.replace("\\", "\\\\").replace('"', '\\"') + '"""'
    try:
        text = f'name = "x"\n[topology.attach]\nprimary = {token}\n'
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return  # a control character TOML does not take unescaped
    masked = mask_toml(text)
    assert PASSWORD not in masked
    assert conninfo_to_dict(tomllib.loads(masked)["topology"]["attach"]["primary"]) == {
        "host": "/tmp", "password": MASK}


def test_resume_connects_without_the_masked_password() -> None:
    from syncrep_lab.plan.load import load_spec
    from syncrep_lab.run.runner import _with_masked_passwords_dropped

    spec = load_spec(mask_toml('name = "x"\n[topology.attach]\n'
                                'primary = "host=/tmp port=1 password=real"\n'
                                'standbys = { b = "postgresql://u:real@h/db" }\n'))
    usable = _with_masked_passwords_dropped(spec)
    assert usable.topology.attach is not None
    assert usable.topology.attach.primary == "host=/tmp port=1"
    assert usable.topology.attach.standbys == {"b": "postgresql://u@h/db"}
