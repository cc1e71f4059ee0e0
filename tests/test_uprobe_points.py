"""Where the commit anatomy probe's uprobes go (probes/uprobe_points.py), on the bytes of
the real server binaries, read from disk: the decoder's instructions against objdump's
reading of the same functions (binutils, a dependency of gcc, which ./run setup
installs), the instructions a probe is moved past and the one it lands on checked
against objdump's text, and the debug file that names the places for bpftrace read
back."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from syncrep_lab.pg.installations import resolve
from syncrep_lab.probes import anatomy
from syncrep_lab.probes.uprobe_points import (
    ElfFile,
    alias_elf,
    alias_name,
    elf_symbols,
    file_offsets,
    probe_offsets,
    sweep,
)

EMBEDDED = resolve(None).bin_dir / "postgres"  # the default: 18, no frame pointers
DEBIAN_15 = resolve("15").bin_dir / "postgres"  # with frame pointers: push %rbp first
BINARIES = [EMBEDDED, DEBIAN_15]
# objdump's mnemonics for what a probe may be moved past: loads, moves, compares, tests
# and arithmetic whose destination is a register (checked below: not the stack pointer)
PAST = re.compile(r"(endbr64|nop[lw]?|mov[lqbw]?|movz[bw][lwq]|movs[bw][lwq]|movslq|"
                  r"test[lqbw]?|cmp[lqbw]?|and[lqbw]?|or[lqbw]?|xor[lqbw]?|add[lqbw]?|"
                  r"sub[lqbw]?|lea[lq]?|cmov\w+|set\w+)")
EMULATED = re.compile(r"(j\w+|call|push) ")  # a direct branch or a push of a register


def _objdump(binary: Path, start: int, size: int) -> list[tuple[int, str]]:
    """(address, text) of each instruction objdump reads between the two addresses."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={start}",
                          f"--stop-address={start + size}", str(binary)],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    found = []
    for line in out.splitlines():
        m = re.match(r"\s+([0-9a-f]+):\t(.*)", line)
        if m:
            found.append((int(m.group(1), 16), m.group(2).split("#")[0].strip()))
    return found


def _spans(binary: Path) -> dict[str, tuple[int, int]]:
    spans: dict[str, tuple[int, int]] = {}
    for sym, _ in ElfFile(binary).symbols():
        if sym.name in anatomy.SYMBOLS and sym.kind == 2:
            spans.setdefault(sym.name, (sym.value, sym.size))
    return spans


@pytest.mark.parametrize("binary", BINARIES, ids=["embedded", "debian-15"])
def test_the_decoder_reads_the_functions_as_objdump_does(binary: Path) -> None:
    elf = ElfFile(binary)
    for name, (start, size) in _spans(binary).items():
        code = elf.code(start, size)
        assert code is not None, name
        insns = sweep(code)
        assert insns is not None, name
        assert [start + i.at for i in insns] == [a for a, _ in _objdump(binary, start, size)]


@pytest.mark.parametrize("binary", BINARIES, ids=["embedded", "debian-15"])
def test_a_probe_moves_only_past_loads_and_tests_to_an_emulated_instruction(
        binary: Path) -> None:
    offsets = probe_offsets(binary, anatomy.SYMBOLS)
    assert set(offsets) == set(anatomy.SYMBOLS)
    for name, (start, size) in _spans(binary).items():
        listing = _objdump(binary, start, size)
        first = listing[0][1]
        if offsets[name] == 0:
            continue
        assert not EMULATED.match(first), (name, first)  # moved only off a stepped one
        at = [a for a, _ in listing].index(start + offsets[name])
        landing = listing[at][1]
        assert EMULATED.match(landing) and "*" not in landing, (name, landing)
        for _, text in listing[:at]:
            mnemonic, _, operands = text.partition(" ")
            destination = operands.strip().split(",")[-1]
            assert PAST.fullmatch(mnemonic), (name, text)
            assert "(" not in destination or mnemonic.startswith(("cmp", "test")), text
            assert not re.fullmatch(r"%(rsp|esp|sp|spl)", destination), (name, text)


def test_the_default_binary_is_probed_past_its_first_instructions() -> None:
    """The embedded 18 begins the three functions with loads (no frame pointers): the
    probes move to the first jump or push; Debian's 15 begins them with push %rbp,
    already emulated: they stay."""
    assert all(k > 0 for k in probe_offsets(EMBEDDED, anatomy.SYMBOLS).values())
    assert probe_offsets(DEBIAN_15, anatomy.SYMBOLS) == dict.fromkeys(anatomy.SYMBOLS, 0)


def test_the_alias_file_names_the_places_with_the_binarys_build_id(tmp_path: Path) -> None:
    offsets = probe_offsets(EMBEDDED, anatomy.SYMBOLS)
    debug = tmp_path / "debug"
    debug.write_bytes(alias_elf(EMBEDDED, offsets))
    spans = _spans(EMBEDDED)
    names = {alias_name(f, k): f for f, k in offsets.items()}
    found = {s.name: (s.value, s.size) for s, _ in ElfFile(debug).symbols()}
    assert found == {alias: (spans[f][0] + offsets[f], spans[f][1] - offsets[f])
                     for alias, f in names.items()}
    note = ElfFile(EMBEDDED).section(".note.gnu.build-id")
    assert note and ElfFile(debug).section(".note.gnu.build-id") == note
    # the places in the file, as the kernel reports a uprobe's
    real = elf_symbols(EMBEDDED, anatomy.SYMBOLS)
    at = file_offsets(EMBEDDED, offsets)
    entries = file_offsets(EMBEDDED, dict.fromkeys(anatomy.SYMBOLS, 0))
    assert {f: at[f] - entries[f] for f in at} == offsets and set(real) == set(at)
