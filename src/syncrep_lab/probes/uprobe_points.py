"""Where in a function of the server binary a uprobe goes, so that the kernel emulates
the instruction under it instead of stepping it out of line; the ELF reading and the
x86-64 decoding that choice rests on; and the kernel's own word on where bpftrace put
its probes.

A uprobe replaces the first byte of an instruction with ``int3``. When it fires, the
kernel runs the probe's programs and then has to carry out the instruction it covered:
a few it emulates (x86: the relative jumps, conditional jumps and calls, ``nop``, and
from Linux 6.x ``push`` of a register), every other one it copies to a page of its own
and single-steps there (a debug exception more; in a KVM guest that is a VM exit:
about 10 µs on this VM against 1 to 1.5 µs for an emulated one). A uretprobe is no
different at its entry: it takes the return address from the top of the stack when the
breakpoint fires, puts its trampoline there, and the instruction under the breakpoint is
then carried out like any uprobe's.

A build without frame pointers often begins a function with a few loads and tests before
its first ``push`` (the early exits GCC's shrink-wrapping puts before the prologue), and
one built with ``-fcf-protection`` with ``endbr64``: neither is emulated. The probe can
then sit on the first emulated instruction instead, for the entry and the return alike,
when the instructions before it are *proven* to be straight-line code that touches
neither the stack pointer nor memory (so that every call passes the probe once, with the
return address still on top of the stack), read from the binary's own bytes:

- the whole function is decoded, instruction by instruction, from its symbol's start to
  its symbol's end (and its ``.cold`` parts where the symbol table names them); a byte
  the decoder does not know, or a sweep that does not end exactly at the symbol's end,
  and the probe stays on the first instruction;
- the instructions before the chosen one are each on a short list of harmless forms
  (``endbr64``, ``nop``, loads and moves into a register other than the stack pointer,
  compares and tests, arithmetic on a register other than the stack pointer);
- no jump of the function (or of its cold parts) lands after its first instruction and
  at or before the chosen one, and it has no jump through a register (a jump table):
  otherwise a call could pass the probe twice;
- anything else, and the probe stays where it was: on the function's first instruction.

bpftrace 0.17 refuses both a uprobe at ``FUNC+OFFSET`` (built without the disassembler
that checks an offset is an instruction boundary, it refuses even with ``--unsafe``) and
a uretprobe anywhere but at a symbol. It does read symbols from a binary's separate
debug file, which bcc looks for first under the directory ``BCC_SYMFS`` names: a file
there, at the binary's path, with the binary's build ID and only symbols naming the
chosen instructions (:func:`alias_elf`), lets bpftrace put both probes there. After it
has attached them, the kernel says where they are (:func:`attached_uprobes`,
``BPF_TASK_FD_QUERY``): the recorder checks every one against what it chose.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

MAX_PREFIX = 16  # instructions before the probe point: an early exit's few, not more
_LEGACY = frozenset((0xF0, 0xF2, 0xF3, 0x2E, 0x36, 0x3E, 0x26, 0x64, 0x65, 0x66, 0x67))
_RSP = 4

# -- decoding -------------------------------------------------------------------------

# An opcode's form: whether a ModRM byte follows, and its immediate: "" none, "b" 1
# byte, "w" 2, "wb" 3 (enter), "z" 4 (2 under 0x66 without REX.W), "v" 8 under REX.W
# (mov reg, imm64) else as "z", "moffs" an 8-byte address (4 under 0x67), "rel8" and
# "relz" a relative branch's 1 or 4 bytes, "g3b" and "g3z" group 3 (test has an
# immediate, the others none). An opcode missing from a table is not decoded.
Form = tuple[bool, str]


def _one_byte_map() -> dict[int, Form]:
    t: dict[int, Form] = {}
    for base in range(0x00, 0x40, 8):  # add, or, adc, sbb, and, sub, xor, cmp
        for k in range(4):
            t[base + k] = (True, "")
        t[base + 4], t[base + 5] = (False, "b"), (False, "z")
    t.update({op: (False, "") for op in range(0x50, 0x60)})
    t.update({0x63: (True, ""), 0x68: (False, "z"), 0x69: (True, "z"), 0x6A: (False, "b"),
              0x6B: (True, "b")})
    t.update({op: (False, "") for op in range(0x6C, 0x70)})
    t.update({op: (False, "rel8") for op in range(0x70, 0x80)})
    t.update({0x80: (True, "b"), 0x81: (True, "z"), 0x83: (True, "b")})
    t.update({op: (True, "") for op in range(0x84, 0x90)})
    t.update({op: (False, "") for op in range(0x90, 0xA0) if op != 0x9A})
    t.update({op: (False, "moffs") for op in range(0xA0, 0xA4)})
    t.update({op: (False, "") for op in (0xA4, 0xA5, 0xA6, 0xA7, 0xAA, 0xAB, 0xAC, 0xAD,
                                         0xAE, 0xAF)})
    t.update({0xA8: (False, "b"), 0xA9: (False, "z")})
    t.update({op: (False, "b") for op in range(0xB0, 0xB8)})
    t.update({op: (False, "v") for op in range(0xB8, 0xC0)})
    t.update({0xC0: (True, "b"), 0xC1: (True, "b"), 0xC2: (False, "w"), 0xC3: (False, ""),
              0xC6: (True, "b"), 0xC7: (True, "z"), 0xC8: (False, "wb"), 0xC9: (False, ""),
              0xCA: (False, "w"), 0xCB: (False, ""), 0xCC: (False, ""), 0xCD: (False, "b"),
              0xCF: (False, "")})
    t.update({op: (True, "") for op in (*range(0xD0, 0xD4), *range(0xD8, 0xE0))})
    t[0xD7] = (False, "")
    t.update({op: (False, "rel8") for op in (0xE0, 0xE1, 0xE2, 0xE3, 0xEB)})
    t.update({op: (False, "b") for op in range(0xE4, 0xE8)})
    t.update({0xE8: (False, "relz"), 0xE9: (False, "relz")})
    t.update({op: (False, "") for op in (*range(0xEC, 0xF0), 0xF1, 0xF4, 0xF5,
                                         *range(0xF8, 0xFE))})
    t.update({0xF6: (True, "g3b"), 0xF7: (True, "g3z"), 0xFE: (True, ""), 0xFF: (True, "")})
    return t


def _two_byte_map() -> dict[int, Form]:  # after 0x0f
    t: dict[int, Form] = {}
    modrm = (0x00, 0x01, 0x02, 0x03, 0x0D, *range(0x10, 0x24), *range(0x28, 0x30),
             *range(0x40, 0x70), 0x74, 0x75, 0x76, 0x78, 0x79, 0x7C, 0x7D, 0x7E, 0x7F,
             *range(0x90, 0xA0), 0xA3, 0xA5, 0xAB, 0xAD, 0xAE, 0xAF, *range(0xB0, 0xBA),
             *range(0xBB, 0xC2), 0xC3, 0xC7, *range(0xD0, 0x100))
    t.update({op: (True, "") for op in modrm})
    t.update({op: (True, "b") for op in (0x70, 0x71, 0x72, 0x73, 0xA4, 0xAC, 0xBA, 0xC2,
                                         0xC4, 0xC5, 0xC6)})
    t.update({op: (False, "") for op in (0x05, 0x06, 0x07, 0x08, 0x09, 0x0B, 0x0E,
                                         *range(0x30, 0x36), 0x37, 0x77, 0xA0, 0xA1,
                                         0xA2, 0xA8, 0xA9, 0xAA, *range(0xC8, 0xD0))})
    t.update({op: (False, "relz") for op in range(0x80, 0x90)})
    return t


ONE_BYTE, TWO_BYTE = _one_byte_map(), _two_byte_map()
_VEX_IMM8 = frozenset((0x70, 0x71, 0x72, 0x73, 0xC2, 0xC4, 0xC5, 0xC6))  # in the 0f map


@dataclass(frozen=True)
class Instruction:
    """One decoded instruction: where it starts in the code given and its length, its
    legacy prefixes, REX byte (0: none), opcode bytes (with the 0x0f escapes; a VEX
    instruction's are its VEX bytes and opcode), ModRM byte (None: none), and a direct
    branch's target, as an offset in the same code (None: not one)."""

    at: int
    size: int
    prefixes: bytes
    rex: int
    opcode: bytes
    modrm: int | None
    target: int | None

    @property
    def reg(self) -> int:
        """ModRM's reg field, REX.R included (0-15)."""
        return ((self.modrm or 0) >> 3 & 7) | (self.rex & 4) << 1

    @property
    def rm(self) -> int:
        """ModRM's r/m field, REX.B included: a register when :attr:`register_form`."""
        return ((self.modrm or 0) & 7) | (self.rex & 1) << 3

    @property
    def register_form(self) -> bool:
        """The r/m operand is a register (ModRM mod = 3), not memory."""
        return self.modrm is not None and self.modrm >> 6 == 3

    @property
    def rip_relative(self) -> bool:
        return self.modrm is not None and self.modrm & 0xC7 == 0x05


def decode(code: bytes, at: int = 0) -> Instruction | None:
    """The x86-64 instruction at ``code[at:]``, or None where it is not one this decoder
    knows (EVEX, XOP, 3DNow!, an opcode invalid in 64-bit mode, a branch with an operand
    size prefix) or runs past the end of ``code``.

    >>> i = decode(bytes.fromhex("488b0551577b00"))  # mov 0x7b5751(%rip),%rax
    >>> i.size, i.opcode.hex(), i.reg, i.rip_relative
    (7, '8b', 0, True)
    >>> decode(bytes.fromhex("0f8ed2010000"), 0).target  # jle +0x1d2
    472
    >>> decode(bytes.fromhex("4156")).size  # push %r14
    2
    >>> [decode(bytes.fromhex(h)).size for h in ("f30f1efa", "64488b042528000000",
    ...                                           "c5f877", "48b80100000000000000")]
    [4, 9, 3, 10]
    >>> decode(bytes.fromhex("0f8e")) is None  # cut short
    True
    """
    end = min(len(code), at + 15)
    i = at
    prefixes = bytearray()
    while i < end and code[i] in _LEGACY:
        prefixes.append(code[i])
        i += 1
    rex = 0
    if i < end and 0x40 <= code[i] <= 0x4F:
        rex = code[i]
        i += 1
    if i >= end:
        return None
    first = code[i]
    i += 1
    wide, opsize16, addr32 = bool(rex & 8), 0x66 in prefixes, 0x67 in prefixes
    form: Form | None
    if first == 0x0F:
        if i >= end:
            return None
        second = code[i]
        i += 1
        if second in (0x38, 0x3A):
            if i >= end:
                return None
            opcode = bytes((first, second, code[i]))
            i += 1
            form = (True, "b" if second == 0x3A else "")
        else:
            opcode = bytes((first, second))
            form = TWO_BYTE.get(second)
    elif first in (0xC4, 0xC5):  # VEX: never after a REX, 0x66, 0xf2, 0xf3 or lock
        if rex or set(prefixes) & {0x66, 0xF2, 0xF3, 0xF0}:
            return None
        payload = 2 if first == 0xC4 else 1
        if i + payload >= end:
            return None
        space = code[i] & 0x1F if first == 0xC4 else 1
        opcode = bytes(code[i - 1:i + payload + 1])
        op = code[i + payload]
        i += payload + 1
        if space == 1:
            form = (False, "") if op == 0x77 else (True, "b" if op in _VEX_IMM8 else "")
        elif space in (2, 3):
            form = (True, "b" if space == 3 else "")
        else:
            return None
    else:
        opcode = bytes((first,))
        form = ONE_BYTE.get(first)
    if form is None:
        return None
    has_modrm, imm = form
    modrm = None
    if has_modrm:
        if i >= end:
            return None
        modrm = code[i]
        i += 1
        mod, rm = modrm >> 6, modrm & 7
        if first == 0x8F and modrm >> 3 & 7:  # AMD's XOP, not pop
            return None
        if mod != 3:
            if rm == 4:
                if i >= end:
                    return None
                base = code[i] & 7
                i += 1
                i += 4 if mod == 0 and base == 5 else 0
            elif mod == 0 and rm == 5:
                i += 4  # RIP-relative
            i += {1: 1, 2: 4}.get(mod, 0)
    z = 2 if opsize16 and not wide else 4
    reg = (modrm or 0) >> 3 & 7
    size = {"": 0, "b": 1, "w": 2, "wb": 3, "z": z, "v": 8 if wide else z,
            "moffs": 4 if addr32 else 8, "rel8": 1, "relz": 4,
            "g3b": 1 if reg < 2 else 0, "g3z": z if reg < 2 else 0}[imm]
    if imm == "relz" and opsize16:
        return None
    if i + size > end:
        return None
    target = None
    if imm in ("rel8", "relz"):
        rel = int.from_bytes(code[i:i + size], "little", signed=True)
        target = i + size + rel
    i += size
    return Instruction(at, i - at, bytes(prefixes), rex, opcode, modrm, target)


def sweep(code: bytes) -> list[Instruction] | None:
    """Every instruction of ``code`` in order, from its first byte to its last (a
    function's bytes, as its symbol spans them); None when one is not decoded."""
    found = []
    at = 0
    while at < len(code):
        insn = decode(code, at)
        if insn is None:
            return None
        found.append(insn)
        at += insn.size
    return found


# -- which instructions -------------------------------------------------------------


def emulated(insn: Instruction) -> bool:
    """The kernel's x86 uprobes carry this instruction out themselves, with no single
    step (arch/x86/kernel/uprobes.c: branch_setup_xol_ops and push_setup_xol_ops): a
    relative jump, conditional jump or call, ``nop``, or ``push`` of a register (Linux
    6.x; on an older kernel a probe there is stepped, as it would be at the entry).
    Without prefixes: the kernel refuses some (0x66 on a branch) and this list needs
    none."""
    if insn.prefixes:
        return False
    op = insn.opcode
    if insn.rex == 0 and (op in (b"\xe8", b"\xe9", b"\xeb", b"\x90")
                          or (len(op) == 1 and 0x70 <= op[0] <= 0x7F)
                          or (len(op) == 2 and op[0] == 0x0F and 0x80 <= op[1] <= 0x8F)):
        return True
    return len(op) == 1 and 0x50 <= op[0] <= 0x57 and insn.rex in (0, 0x41)


_LOADS = frozenset((0x02, 0x03, 0x0A, 0x0B, 0x12, 0x13, 0x1A, 0x1B, 0x22, 0x23, 0x2A,
                    0x2B, 0x32, 0x33, 0x63, 0x8A, 0x8B, 0x8D))  # reg <- reg op r/m, lea
_COMPARES = frozenset((0x38, 0x39, 0x3A, 0x3B, 0x3C, 0x3D, 0x84, 0x85, 0xA8, 0xA9))
_TO_RM = frozenset((0x00, 0x01, 0x08, 0x09, 0x10, 0x11, 0x18, 0x19, 0x20, 0x21, 0x28,
                    0x29, 0x30, 0x31, 0x88, 0x89, 0xC0, 0xC1, 0xD0, 0xD1, 0xD2, 0xD3))
_TO_AX = frozenset((0x04, 0x05, 0x0C, 0x0D, 0x14, 0x15, 0x1C, 0x1D, 0x24, 0x25, 0x2C,
                    0x2D, 0x34, 0x35))


def harmless(insn: Instruction) -> bool:
    """Neither a jump nor a call nor a return, nor a write to the stack pointer (any
    part of it) or to memory: an instruction a probe can be moved past without changing
    what is on top of the stack or which calls pass it. A short list of forms, enough
    for the loads and tests an early exit begins with; anything else is not.

    >>> [harmless(decode(bytes.fromhex(h))) for h in (
    ...     "8b0db2b95300",    # mov 0x53b9b2(%rip),%ecx
    ...     "833d93b6530001",  # cmpl $0x1,0x53b693(%rip)
    ...     "f30f1efa",        # endbr64
    ...     "4883ec28",        # sub $0x28,%rsp
    ...     "48890424",        # mov %rax,(%rsp)
    ...     "55",              # push %rbp
    ...     "7405")]           # je
    [True, True, True, False, False, False, False]
    """
    if set(insn.prefixes) - {0x64, 0x65, 0x66, 0x67} and not (
            insn.prefixes == b"\xf3" and insn.opcode == b"\x0f\x1e"
            and insn.modrm in (0xFA, 0xFB)):  # endbr64, endbr32
        return False
    op = insn.opcode
    if insn.prefixes == b"\xf3":
        return True  # endbr
    if op == b"\x90" or op == b"\x0f\x1f":  # nop, nopl (it reads no memory)
        return True
    if len(op) == 2 and op[0] == 0x0F:
        if op[1] in (0xB6, 0xB7, 0xBE, 0xBF) or 0x40 <= op[1] <= 0x4F:  # movzx/sx, cmov
            return insn.reg != _RSP
        if 0x90 <= op[1] <= 0x9F:  # setcc
            return insn.register_form and insn.rm != _RSP
        return False
    if len(op) != 1:
        return False
    first = op[0]
    if first in _LOADS:
        return insn.reg != _RSP
    if first in _COMPARES:
        return True
    if first in _TO_AX:
        return True
    if first in (0x80, 0x81, 0x83):  # group 1: /7 is cmp, the others write r/m
        return insn.reg & 7 == 7 or (insn.register_form and insn.rm != _RSP)
    if first in _TO_RM or (first in (0xC6, 0xC7) and insn.reg & 7 == 0):
        return insn.register_form and insn.rm != _RSP
    if 0xB0 <= first <= 0xBF:  # mov imm to a register
        return (first & 7 | (insn.rex & 1) << 3) != _RSP
    if first in (0xF6, 0xF7):  # group 3: /0 and /1 are test
        return insn.reg & 7 < 2
    return False


def _indirect_jump(insn: Instruction) -> bool:
    """A jump through a register or a table (a switch): its targets are not in the
    code. Not one through a RIP-relative slot (a tail call through the GOT)."""
    return (insn.opcode == b"\xff" and (insn.reg & 7) in (4, 5)
            and not insn.rip_relative)


def probe_offset(code: bytes, parts: Sequence[tuple[int, bytes]] = ()) -> int:
    """Where in the function whose bytes are ``code`` (its symbol's span) the entry and
    return probes can go: the offset of the first instruction the kernel emulates, when
    every instruction before it is :func:`harmless`, nothing jumps in between (from the
    function or from ``parts``: its other pieces, e.g. ``.cold``, as (their address less
    the function's, bytes)), and it has no indirect jump; otherwise 0, the first
    instruction, as before.

    >>> probe_offset(bytes.fromhex(  # the embedded PostgreSQL 18's SyncRepWaitForLSN
    ...     "8b05b2b95300" "85c0" "0f8e02000000" "55" "5d" "c3"))
    8
    >>> probe_offset(bytes.fromhex("55" "4889e5" "5d" "c3"))  # push %rbp first: stays
    0
    >>> probe_offset(bytes.fromhex(  # a jump back between the entry and the probe
    ...     "8b05b2b95300" "85c0" "0f8e02000000" "55" "5d" "75f2" "c3"))
    0
    >>> probe_offset(bytes.fromhex("4883ec08" "55" "c3"))  # sub $8,%rsp comes first
    0
    """
    insns = sweep(code)
    if not insns or emulated(insns[0]):
        return 0
    chosen = next((k for k, insn in enumerate(insns[:MAX_PREFIX + 1])
                   if emulated(insn) or not harmless(insn)), None)
    if chosen is None or not emulated(insns[chosen]):
        return 0
    offset = insns[chosen].at
    pieces = [(0, insns)]
    for start, body in parts:
        swept = sweep(body)
        if swept is None:
            return 0
        pieces.append((start, swept))
    for start, swept in pieces:
        for insn in swept:
            if _indirect_jump(insn):
                return 0
            if insn.target is not None and 0 < start + insn.target <= offset:
                return 0
    return offset


# -- the binary -----------------------------------------------------------------------


@dataclass(frozen=True)
class Symbol:
    name: str
    value: int  # the address it is linked at
    size: int
    kind: int  # 2 a function, 1 data


# The symbols of the files last read (ElfFile.symbols), by file identity, least recent
# first: a run's server binaries, a few megabytes each.
_SYMBOLS: dict[tuple[str, int, int, int, int, int], tuple[tuple[Symbol, bool], ...]] = {}
_SYMBOLS_KEPT = 4


class ElfFile:
    """The parts of an ELF file the probe reads: its symbols, the bytes at an address,
    a named section. OSError when the file cannot be read, ValueError when it is not an
    ELF file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with path.open("rb") as f:
            head = f.read(64)
            if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) \
                    or head[5] not in (1, 2):
                raise ValueError(f"{path} is not an ELF file")
            self.wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
            self.order = order
            self.machine, = struct.unpack_from(order + "H", head, 0x12)
            if self.wide:
                phoff, shoff = struct.unpack_from(order + "QQ", head, 0x20)
                phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(
                    order + "HHHHH", head, 0x36)
                section = struct.Struct(order + "IIQQQQIIQQ")
                program = struct.Struct(order + "IIQQQQQQ")
            else:
                phoff, shoff = struct.unpack_from(order + "II", head, 0x1C)
                phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(
                    order + "HHHHH", head, 0x2A)
                section = struct.Struct(order + "IIIIIIIIII")
                program = struct.Struct(order + "IIIIIIII")
            f.seek(shoff)
            table = f.read(shentsize * shnum)
            if shentsize < section.size or len(table) < shentsize * shnum:
                raise ValueError(f"{path}: truncated ELF section headers")
            # (name, type, address, offset, size, link) of each section: the same
            # places in both classes
            self.sections = [(h[0], h[1], h[3], h[4], h[5], h[6]) for h in (
                section.unpack_from(table, k * shentsize) for k in range(shnum))]
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            # (type, flags, file offset, address, size in the file) of each segment
            self.segments: list[tuple[int, int, int, int, int]] = []
            for k in range(phnum if len(table) >= phentsize * phnum else 0):
                h = program.unpack_from(table, k * phentsize)
                self.segments.append((h[0], h[1], h[2], h[3], h[5]) if self.wide
                                     else (h[0], h[6], h[1], h[2], h[4]))
        self.shstrndx = shstrndx

    def _read(self, offset: int, size: int) -> bytes:
        with self.path.open("rb") as f:
            f.seek(offset)
            return f.read(size)

    def symbols(self) -> Iterator[tuple[Symbol, bool]]:
        """Every defined function and data symbol: the dynamic table's, then the full
        one's (the flag: from the full table). Read once per file as it is now (its
        inode, size and change time): a probed repeat asks for them several times, and a
        server binary has some 40,000, about 0.2 s to read in Python each time."""
        st = self.path.stat()
        key = (str(self.path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
               st.st_ctime_ns)
        kept = _SYMBOLS.pop(key, None)
        if kept is None:
            kept = tuple(self._read_symbols())
            while len(_SYMBOLS) >= _SYMBOLS_KEPT:
                del _SYMBOLS[next(iter(_SYMBOLS))]
        _SYMBOLS[key] = kept  # the most recent last
        return iter(kept)

    def _read_symbols(self) -> Iterator[tuple[Symbol, bool]]:
        entry = struct.Struct(self.order + ("IBBHQQ" if self.wide else "IIIBBH"))
        for kind in (11, 2):  # SHT_DYNSYM, SHT_SYMTAB
            for _, sh_type, _, offset, size, link in self.sections:
                if sh_type != kind or not 0 <= link < len(self.sections):
                    continue
                table = self._read(offset, size)
                names = self._read(self.sections[link][3], self.sections[link][4])
                for at in range(0, len(table) - entry.size + 1, entry.size):
                    fields = entry.unpack_from(table, at)
                    name_at, info, shndx, value, length = (
                        (fields[0], fields[1], fields[3], fields[4], fields[5])
                        if self.wide else
                        (fields[0], fields[3], fields[5], fields[1], fields[2]))
                    if shndx == 0 or info & 0xF not in (1, 2):  # undefined, not FUNC/OBJECT
                        continue
                    name = names[name_at:names.find(b"\0", name_at)].decode(
                        errors="replace")
                    yield Symbol(name, value, length, info & 0xF), kind == 2

    def file_offset(self, address: int) -> int | None:
        """Where in the file the byte loaded at ``address`` lies (an executable
        segment's), as the kernel counts a uprobe's offset."""
        for p_type, flags, offset, vaddr, filesz in self.segments:
            if p_type == 1 and flags & 1 and vaddr <= address < vaddr + filesz:
                return address - vaddr + offset
        return None

    def code(self, address: int, size: int) -> bytes | None:
        """The ``size`` bytes loaded at ``address`` from an executable segment."""
        at = self.file_offset(address)
        if at is None or self.file_offset(address + size - 1) is None:
            return None
        data = self._read(at, size)
        return data if len(data) == size else None

    def section(self, name: str) -> bytes | None:
        if not 0 <= self.shstrndx < len(self.sections):
            return None
        _, _, _, offset, size, _ = self.sections[self.shstrndx]
        names = self._read(offset, size)
        for sh_name, _, _, at, length, _ in self.sections:
            if names[sh_name:names.find(b"\0", sh_name)] == name.encode():
                return self._read(at, length)
        return None


def elf_symbols(binary: Path, wanted: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Which of ``wanted`` the ELF file ``binary`` defines, in its dynamic symbol table
    (or, failing that, its full one): name -> (value: the address it is linked at, type:
    2 for a function, 1 for data). OSError when the file cannot be read, ValueError when
    it is not an ELF file."""
    want = set(wanted)
    found: dict[str, tuple[int, int]] = {}
    for sym, _ in ElfFile(binary).symbols():
        if sym.name in want and sym.name not in found:
            found[sym.name] = (sym.value, sym.kind)
            if len(found) == len(want):
                break
    return found


def probe_offsets(binary: Path, functions: Sequence[str]) -> dict[str, int]:
    """For each of ``functions`` the binary defines: :func:`probe_offset` on its own
    bytes (and its ``.cold`` parts'), 0 where the machine is not x86-64 or a function's
    bytes cannot be read. OSError, ValueError as :class:`ElfFile`."""
    elf = ElfFile(binary)
    if elf.machine != 62 or not elf.wide:  # EM_X86_64
        return dict.fromkeys(functions, 0)
    spans: dict[str, Symbol] = {}
    cold: dict[str, list[Symbol]] = {f: [] for f in functions}
    for sym, _ in elf.symbols():
        if sym.kind != 2:
            continue
        if sym.name in cold and sym.name not in spans:
            spans[sym.name] = sym
        base = sym.name.split(".", 1)[0]
        if base in cold and sym.name.startswith(base + ".cold"):
            cold[base].append(sym)
    found = {}
    for name, sym in spans.items():
        body = elf.code(sym.value, sym.size) if sym.size else None
        parts = [(c.value - sym.value, elf.code(c.value, c.size)) for c in cold[name]]
        if body is None or any(p is None for _, p in parts):
            found[name] = 0
            continue
        found[name] = probe_offset(body, [(at, p) for at, p in parts if p is not None])
    return found


def alias_name(function: str, offset: int) -> str:
    """The symbol that names ``function`` + ``offset`` for bpftrace."""
    return f"{function}__at_{offset}"


def _spans(elf: ElfFile, functions: Sequence[str]) -> dict[str, Symbol]:
    spans: dict[str, Symbol] = {}
    for sym, _ in elf.symbols():
        if sym.kind == 2 and sym.name in functions and sym.name not in spans:
            spans[sym.name] = sym
    return spans


def file_offsets(binary: Path, offsets: Mapping[str, int]) -> dict[str, int]:
    """Where each function's probe lies in the file (the offset the kernel reports for
    a uprobe), the function's bytes ``offsets[name]`` in; a function the binary does
    not define, or outside its executable segments, is left out."""
    elf = ElfFile(binary)
    found = {}
    for name, sym in _spans(elf, list(offsets)).items():
        at = elf.file_offset(sym.value + offsets[name])
        if at is not None:
            found[name] = at
    return found


def alias_elf(binary: Path, offsets: Mapping[str, int]) -> bytes:
    """A debug file for ``binary`` that defines only a symbol for each function with a
    non-zero offset (:func:`alias_name`, at the function's address plus the offset, to
    the function's end): an ELF file with the binary's build ID note (bcc ignores a
    debug file whose build ID is not the binary's), a symbol table and its strings."""
    elf = ElfFile(binary)
    note = elf.section(".note.gnu.build-id") or b""
    aliases = {alias_name(name, offsets[name]): (sym.value + offsets[name],
                                                  sym.size - offsets[name])
               for name, sym in _spans(elf, [f for f, k in offsets.items() if k]).items()
               if 0 < offsets[name] < sym.size}
    shstr = b"\0.note.gnu.build-id\0.symtab\0.strtab\0.shstrtab\0"
    strtab, symtab = b"\0", b"\0" * 24
    for name, (address, size) in aliases.items():
        symtab += struct.pack("<IBBHQQ", len(strtab), 0x12, 0, 0xFFF1, address, size)
        strtab += name.encode() + b"\0"  # STB_GLOBAL, STT_FUNC; SHN_ABS
    body = bytearray()
    places = []
    for blob in (note, symtab, strtab, shstr):
        body += b"\0" * (-(64 + len(body)) % 8)
        places.append(64 + len(body))
        body += blob
    body += b"\0" * (-(64 + len(body)) % 8)
    header = struct.Struct("<IIQQQQIIQQ")

    def name_of(section: str) -> int:
        return shstr.index(section.encode() + b"\0")

    sections = header.pack(*(0,) * 10) + b"".join((
        header.pack(name_of(".note.gnu.build-id"), 7, 2, 0, places[0], len(note), 0, 0, 4,
                    0),
        header.pack(name_of(".symtab"), 2, 0, 0, places[1], len(symtab), 3, 1, 8, 24),
        header.pack(name_of(".strtab"), 3, 0, 0, places[2], len(strtab), 0, 0, 1, 0),
        header.pack(name_of(".shstrtab"), 3, 0, 0, places[3], len(shstr), 0, 0, 1, 0)))
    ident = b"\x7fELF" + bytes((2, 1, 1, 0)) + b"\0" * 8
    head = ident + struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0, 0, 64 + len(body), 0, 64,
                               0, 0, 64, 5, 4)
    return head + bytes(body) + sections


# -- where the kernel put them --------------------------------------------------------

_BPF_SYSCALL = {"x86_64": 321, "aarch64": 280}
_BPF_TASK_FD_QUERY = 20
_FD_UPROBE, _FD_URETPROBE = 4, 5


def attached_uprobes(pid: int) -> list[tuple[bool, int]] | None:
    """The uprobes process ``pid`` (a bpftrace) holds with a BPF program on them, as
    the kernel has them (BPF_TASK_FD_QUERY on each of its perf event descriptors): (a
    return probe?, the offset in its file), sorted. None where that cannot be asked."""
    number = _BPF_SYSCALL.get(platform.machine())
    if number is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    found = []
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:[perf_event]":
                continue
        except OSError:
            continue
        buf = ctypes.create_string_buffer(4096)
        attr = ctypes.create_string_buffer(48)
        struct.pack_into("<IIIIQIIQQ", attr, 0, pid, int(fd), 0, len(buf),
                         ctypes.addressof(buf), 0, 0, 0, 0)
        if libc.syscall(number, _BPF_TASK_FD_QUERY, attr, len(attr)) != 0:
            continue  # not a probe with a program: the interval timers, or gone
        *_, fd_type, offset, _ = struct.unpack_from("<IIIIQIIQQ", attr)
        if fd_type in (_FD_UPROBE, _FD_URETPROBE):
            found.append((fd_type == _FD_URETPROBE, offset))
    return sorted(found)
