"""The fuzz test's pieces: base archives from three writers, a seeded mutator, and a strict reference reader.

The reference reads the bytes as GNU tar does (numbers: leading NUL skipped, leading spaces, octal digits
ending at a NUL or space; GNU base-256; the unsigned checksum; padding required) and groups members by key
as webdataset does (``keys.split_member_name``). Where tar leaves a choice the project made its own (a
non-regular member's declared size is stepped over, the last pax header before a member wins, a repeated
extension keeps the last member), the reference follows the project, so what it flags is a wrong sample,
not a taste. Trade-off: ~100 lines of tar by hand instead of ``tarfile``, whose number parsing takes a
sign and ``_`` (the bug of issue 32 item 1) and so cannot be the reference.
"""

from __future__ import annotations

import io
import itertools
import random
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from shardstream.format.keys import split_member_name

BLOCK = 512
ZERO = bytes(BLOCK)
REGULAR = b"0\x007"


class Damage(Exception):
    """The strict reading stops here."""


@dataclass
class Strict:
    """A strict reading: ``samples`` complete (key, members); ``pending`` the sample in progress when a
    header (whose key is unknown) was damaged, all its members read (a reader trusting a sidecar's end may
    hand it out); ``error`` why the reading stopped early, or None; ``headers`` every header's offset."""

    samples: list[tuple[str, dict[str, bytes]]] = field(default_factory=list)
    pending: tuple[str, dict[str, bytes]] | None = None
    error: str | None = None
    headers: list[tuple[int, int]] = field(default_factory=list)  # (offset, typeflag)
    stop: int = 0  # where the reading ended: the end-of-archive block, the file's end or the damage


def gnu_number(raw: bytes) -> int:
    """A number field as GNU tar's from_header reads it (``Damage`` where GNU tar errs or goes negative)."""
    if raw[:1] == b"\x80":
        return int.from_bytes(raw[1:], "big")
    if raw[:1] == b"\xff":
        raise Damage("negative base-256")
    at = 1 if raw[:1] == b"\0" else 0  # GNU: "buggy tar of unknown vintage" overflowed into this field
    while at < len(raw) and raw[at] in ISSPACE:
        at += 1
    if at == len(raw):
        raise Damage("blanks where a number is expected")
    start = at
    while at < len(raw) and 0x30 <= raw[at] <= 0x37:
        at += 1
    if at < len(raw) and raw[at] != 0 and raw[at] not in ISSPACE:
        raise Damage(f"bad number {raw!r}")
    return int(raw[start:at], 8) if at > start else 0


ISSPACE = b" \t\n\v\f\r"


def _pax(data: bytes) -> dict[str, str]:
    records, pos = {}, 0
    while pos < len(data) and data[pos]:
        space = data.find(b" ", pos)
        digits = data[pos:space] if space > pos else b""
        if not (digits.isdigit() and digits.isascii()):
            raise Damage("pax length")
        end = pos + int(digits)
        if end <= space + 1 or end > len(data) or data[end - 1] != 0x0A or b"=" not in data[space + 1 : end]:
            raise Damage("pax record")
        key, _, value = data[space + 1 : end - 1].partition(b"=")
        records[key.decode("utf-8", "replace")] = value.decode("utf-8", "surrogateescape")
        pos = end
    return records


def _name(header: bytes) -> str:
    name = header[:100].split(b"\0", 1)[0]
    if header[257:263] == b"ustar\0" and header[345]:  # POSIX ustar's prefix; GNU's magic has none
        name = header[345:500].split(b"\0", 1)[0] + b"/" + name
    return name.decode("utf-8", "surrogateescape")


def strict_read(data: bytes) -> Strict:
    out = Strict()
    key, members = None, {}
    pax: dict[str, str] = {}
    long_name = None
    pos = 0
    try:
        while pos < len(data):
            if len(data) - pos < BLOCK:
                raise Damage("truncated header")
            header = data[pos : pos + BLOCK]
            if header == ZERO:
                break
            out.headers.append((pos, header[156]))
            stored = gnu_number(header[148:156])
            if stored != sum(header[:148]) + 256 + sum(header[156:]):
                raise Damage("checksum")
            if "size" in pax:
                text = pax["size"]
                if not (text.isascii() and text.isdigit() and len(text) <= 20):
                    raise Damage("pax size")
                size = int(text)
            else:
                size = gnu_number(header[124:136])
            if header[156] in REGULAR:
                name = long_name if long_name is not None else pax.get("path") or _name(header)
                pax, long_name = {}, None
                name_key, ext = split_member_name(name)
                if key is not None and name_key != key:
                    out.samples.append((key, members))
                    key, members = None, {}
                if pos + BLOCK + size + (-size % BLOCK) > len(data):
                    members = None  # the sample in progress lacks this member: nobody may hand it out
                    raise Damage("truncated member")
                key = name_key
                members[ext] = data[pos + BLOCK : pos + BLOCK + size]
            else:
                if pos + BLOCK + size + (-size % BLOCK) > len(data):
                    raise Damage("truncated extended header")
                body = data[pos + BLOCK : pos + BLOCK + size]
                if header[156] == ord("x"):
                    pax = _pax(body)
                elif header[156] == ord("L"):
                    long_name = body.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
                elif header[156] != ord("g"):
                    pax, long_name = {}, None
            pos += BLOCK + size + (-size % BLOCK)
    except Damage as exc:
        out.error, out.stop = f"{exc} at {pos}", pos
        if key is not None and members is not None:
            out.pending = (key, members)
        return out
    if key is not None:
        out.samples.append((key, members))
    out.stop = pos
    return out


def span_samples(
    data: bytes, offsets: list[int], strict: Strict, *, anywhere: bool = False
) -> list[tuple[str, dict[str, bytes]]]:
    """The samples a sidecar's spans hold when each is read strictly on its own: a span that starts on a
    header of the strict reading from byte 0 (or past the damage that stopped it) and holds exactly one
    sample, nothing else. A reader that jumps to spans (at random, or past damage under on_error="skip")
    may hand these out; no other sample after the damage can be told apart from member data.

    ``anywhere``: any span that reads strictly as one whole sample. For a stale sidecar over a shard
    rewritten in place at the same size: a reader that jumps to a span reads what its bytes say there,
    and cannot see that an earlier member's size now runs over it without reading every header before it
    (``verify`` with sha256 is the check for that)."""
    starts = {offset for offset, _ in strict.headers}
    out = []
    for start, end in itertools.pairwise(offsets):
        if anywhere or start in starts or (strict.error is not None and start >= strict.stop):
            span = strict_read(data[start:end])
            if span.error is None and len(span.samples) == 1:
                out.append(span.samples[0])
    return out


# -- base archives -------------------------------------------------------------------------------------

LONG = "l" * 120  # past ustar's 100-byte name: pax path (packer, TarWriter), 'L' (GNU), prefix (posix)


def _contents(i: int) -> dict[str, bytes]:
    sizes = [0, 1, 511, 512, 513, 1500, 37]
    return {"txt": bytes([65 + i]) * sizes[i % len(sizes)], "cls": str(i).encode()}


def packer_archive(root: Path) -> bytes:
    import packer

    records = [{"id": f"p{i:02d}", "blob": _contents(i)["txt"], "label": i} for i in range(5)]
    records.append({"id": LONG, "blob": b"\x89PNG\r\n\x1a\n" + b"z" * 600})
    records.append({"id": "dir/sub/" + "d" * 95, "blob": b""})
    packer.pack(records, root / "packed")
    return (root / "packed" / "train-000000.tar").read_bytes()


def tarwriter_archive(root: Path) -> bytes:
    import webdataset

    out = io.BytesIO()
    with webdataset.TarWriter(out) as writer:
        for i in range(5):
            writer.write({"__key__": f"w{i:02d}", **_contents(i)})
        writer.write({"__key__": "deep/" + LONG, "json": b'{"a": 1}', "bin": bytes(900)})
    return out.getvalue()


def gnu_archive(root: Path, fmt: str) -> bytes:
    """GNU tar over a folder (directories included), reproducible: fixed owner, times and order."""
    src = root / f"src-{fmt}"
    (src / "sub").mkdir(parents=True)
    for i in range(4):
        for ext, body in _contents(i + 2).items():
            (src / ("sub" if i % 2 else ".") / f"g{i:02d}.{ext}").write_bytes(body)
    (src / f"{LONG}.txt").write_bytes(b"long name")
    (src / f"{LONG}.cls").write_bytes(b"9")
    options = ["--owner=0", "--group=0", "--numeric-owner", "--mtime=@1000000000", "--sort=name"]
    if fmt == "pax":  # a global header ('g') and per-member ones ('x', for the long name)
        options += ["--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime,comment=fuzz"]
    tar = subprocess.run(
        ["tar", f"--format={fmt}", *options, "-cf", "-", "-C", str(src), "."],
        check=True,
        capture_output=True,
    )
    return tar.stdout


def tarfile_archive(root: Path) -> bytes:
    """Python's tarfile, GNU format: what webdataset's readers see, with a symlink and a hard link."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(3):
            for ext, body in _contents(i + 4).items():
                info = tarfile.TarInfo(f"t{i:02d}.{ext}")
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
        link = tarfile.TarInfo("t00.link")
        link.type, link.linkname = tarfile.SYMTYPE, "t00.txt"
        tar.addfile(link)
    return out.getvalue()


def base_archives(root: Path) -> dict[str, bytes]:
    return {
        "packer": packer_archive(root),
        "tarwriter": tarwriter_archive(root),
        "gnu": gnu_archive(root, "gnu"),
        "pax": gnu_archive(root, "pax"),
        "tarfile": tarfile_archive(root),
    }


# -- the mutator ---------------------------------------------------------------------------------------


def resum(header: bytearray) -> None:
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)


SIZE_FIELDS = [
    b"77777777777\0",  # 8 GiB - 1
    b"-0000001000",
    b"+0000001000",
    b"00000001800",
    b"0000_001000",
    b" 1000 77777",  # GNU reads 512: what follows the space is not read
    b"\x0000001000\0",  # GNU skips one leading NUL
    b"\0" * 12,
    b"\x80" + (1 << 40).to_bytes(11, "big"),
    b"\x80" + (1024).to_bytes(11, "big"),
    b"\xff" * 12,
    b"0000000\xd9\xa3\xd9\xa3",  # Arabic-Indic digits
    b"\t0001000\0",
    b" " * 12,  # GNU: "blanks in header where numeric value expected"
    b"000000010000",  # twelve digits, no NUL: GNU reads all twelve
    b"00000001000x",
]
# The checksum's value in other spellings (``%`` takes the value): GNU tar takes the first three, refuses
# the rest, whose digits Python's int() still reads.
CHECKSUM_SPELLINGS = [b"%07o\0", b" %06o ", b"\0%06o\0", b"+%06o\0", b"%06o\x10\x10", b"0%06o_"]
NAMES = [
    b"",
    b".",
    b"x",
    b"a.b.c",
    b"noext",
    b"/abs.txt",
    b"../up.txt",
    b"k/\xff\xfe.txt",
    b"a\0b.txt",
    b"p00.txt",
]
TYPEFLAGS = b"0\x00712345xgLKSVMDA"


def mutate(base: bytes, headers: list[tuple[int, int]], rng: random.Random) -> tuple[str, bytes]:
    """One mutant of ``base`` (whose strict reading found ``headers``): what was done, and the bytes."""
    data = bytearray(base)
    kind = rng.choice(
        ["flip", "flip", "truncate", "insert", "delete", "field", "field", "field", "pax", "copy"]
    )
    at = rng.choice(headers)[0] if headers else 0
    if kind == "flip":  # random bytes anywhere; about one in three inside a header, checksum recomputed
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3 and headers:
            data[at + rng.randrange(BLOCK)] = rng.randrange(256)
            block = data[at : at + BLOCK]
            resum(block)
            data[at : at + BLOCK] = block
            kind = "flip+resum"
        return kind, bytes(data)
    if kind == "truncate":
        cut = rng.randrange(len(data)) if rng.random() < 0.5 else rng.randrange(len(data) // BLOCK) * BLOCK
        return f"truncate@{cut}", bytes(data[:cut])
    if kind in ("insert", "delete"):
        where = rng.randrange(len(data) // BLOCK) * BLOCK
        if kind == "delete":
            return f"delete@{where}", bytes(data[:where] + data[where + BLOCK :])
        block = rng.choice(
            [ZERO, bytes(rng.randrange(256) for _ in range(BLOCK)), bytes(data[at : at + BLOCK])]
        )
        return f"insert@{where}", bytes(data[:where] + block + data[where:])
    if kind == "copy" and len(headers) > 1:  # a member's header block again, somewhere else: a repeated key
        where = rng.choice(headers)[0]
        return f"copy@{at}->{where}", bytes(data[:where] + data[at : at + BLOCK] + data[where:])
    block = data[at : at + BLOCK]
    if kind == "pax" and block[156] == ord(
        "x"
    ):  # a record put first (the last of a key wins), lengths kept true
        size = gnu_number(bytes(block[124:136]))
        value = rng.choice(
            ["1e3", "-5", "\u00b2", "9" * 30, "0", "513", str(1 << 64), "", "a\0b.txt", "x/y.z"]
        )
        record = rng.choice([b"size=", b"path="]) + value.encode()
        record = f"{len(record) + 4} ".encode() + record + b"\n"
        body = data[at + BLOCK : at + BLOCK + size] + record
        block[124:136] = b"%011o\0" % len(body)
        resum(block)
        rest = data[at + BLOCK + size + (-size % BLOCK) :]
        return f"pax@{at}:{record!r}", bytes(data[:at] + block + body + bytes(-len(body) % BLOCK) + rest)
    choice = rng.randrange(5)
    if choice == 4:  # the right checksum, spelled another way
        resum(block)
        value = int(bytes(block[148:154]), 8)
        spelling = rng.choice(CHECKSUM_SPELLINGS)
        if b"_" in spelling:
            text = b"%07o" % value
            field = text[:3] + b"_" + text[3:]
        else:
            field = spelling % value
        block[148:156] = field.ljust(8, b"\0")[:8]
        data[at : at + BLOCK] = block
        return f"checksum@{at}:{bytes(block[148:156])!r}", bytes(data)
    if choice == 0:
        block[124:136] = rng.choice(SIZE_FIELDS).ljust(12, b"\0")[:12]
    elif choice == 1:
        block[0:100] = rng.choice(NAMES).ljust(100, b"\0")
    elif choice == 2:
        block[156] = rng.choice(TYPEFLAGS)
    else:
        block[345:355] = b"pre/fix\0\0\0"
    if rng.random() < 0.9:
        resum(block)
    data[at : at + BLOCK] = block
    return f"field{choice}@{at}", bytes(data)
