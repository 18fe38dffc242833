"""Split GGUFs (``NAME-00001-of-0000N.gguf``) as one model: akunu's loader maps a
single file, so a split set is joined once into ``$AKUNU_CACHE/gguf-joined``
(the first split's metadata without its ``split.*`` keys, every split's
tensors behind one header, the data copied) and loaded from there. Every
length and offset read from a split is checked against its file.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
import shutil
import struct
import sys
from typing import List, Optional, Sequence, Tuple

from .errors import AkunuError, ModelFormatError

# a split's file name: NAME-<index>-of-<count>.gguf (llama.cpp's gguf-split)
SPLIT_NAME = re.compile(r"^(?P<prefix>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
_SPLIT = SPLIT_NAME


def _expand(p: str) -> str:
    return os.path.expanduser(os.path.expandvars(p))


def akunu_cache_dir() -> str:
    return _expand(os.environ.get("AKUNU_CACHE", "~/.cache/akunu"))


def free_bytes(path: str) -> int:
    p = os.path.abspath(path)
    while not os.path.exists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    return shutil.disk_usage(p).free


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


_GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_U16, _I32, _U32 = 2, 5, 4


class _GGUFHeader:
    """The parts of a GGUF header a join needs: its key-value entries as raw bytes, its tensor
    infos, and where its data starts. Every length is checked against the file."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "rb") as f:
            self.size = os.fstat(f.fileno()).st_size
            if self.size < 24:
                raise self._bad("too short")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                self._parse(mm)

    def _bad(self, why: str) -> ModelFormatError:
        return ModelFormatError(f"'{self.path}' is not a GGUF split akunu can join: {why}")

    def _take(self, n: int) -> int:
        if n < 0 or self.pos + n > self.size:
            raise self._bad("truncated header")
        p = self.pos
        self.pos += n
        return p

    def _int(self, mm, fmt: str) -> int:
        return struct.unpack_from(fmt, mm, self._take(struct.calcsize(fmt)))[0]

    def _string(self, mm) -> bytes:
        n = self._int(mm, "<Q")
        p = self._take(n)
        return mm[p:p + n]

    def _skip(self, mm, t: int, depth: int = 0) -> None:
        if t in _GGUF_SIZES:
            self._take(_GGUF_SIZES[t])
        elif t == 8:
            self._string(mm)
        elif t == 9 and depth < 4:
            et, n = self._int(mm, "<I"), self._int(mm, "<Q")
            if et in _GGUF_SIZES:
                if n > self.size:
                    raise self._bad("array longer than the file")
                self._take(_GGUF_SIZES[et] * n)
            else:
                if n > self.size:
                    raise self._bad("array longer than the file")
                for _ in range(n):
                    self._skip(mm, et, depth + 1)
        else:
            raise self._bad(f"unknown value type {t}")

    def _parse(self, mm) -> None:
        self.pos = 0
        if mm[:4] != b"GGUF":
            raise self._bad("no GGUF magic")
        self._take(4)
        self.version = self._int(mm, "<I")
        if self.version not in (2, 3):
            raise self._bad(f"GGUF version {self.version}")
        n_tensors, n_kv = self._int(mm, "<Q"), self._int(mm, "<Q")
        if n_tensors > self.size or n_kv > self.size:
            raise self._bad("counts larger than the file")
        self.kv: List[Tuple[str, bytes]] = []
        self.alignment, self.split_no, self.split_count, self.split_tensors = 32, None, None, None
        for _ in range(n_kv):
            start = self.pos
            key = self._string(mm).decode("utf-8", "replace")
            t = self._int(mm, "<I")
            vpos = self.pos
            self._skip(mm, t)
            value = None
            if t in (_U16, _I32, _U32):
                value = struct.unpack_from({_U16: "<H", _I32: "<i", _U32: "<I"}[t], mm, vpos)[0]
            if key == "general.alignment":
                if t != _U32 or not value or value & (value - 1):
                    raise self._bad("bad general.alignment")
                self.alignment = value
            elif key == "split.no":
                self.split_no = value
            elif key == "split.count":
                self.split_count = value
            elif key == "split.tensors.count":
                self.split_tensors = value
            self.kv.append((key, mm[start:self.pos]))
        self.tensors: List[Tuple[bytes, List[int], int, int]] = []
        for _ in range(n_tensors):
            name = self._string(mm)
            nd = self._int(mm, "<I")
            if nd > 8:
                raise self._bad(f"tensor with {nd} dimensions")
            dims = [self._int(mm, "<Q") for _ in range(nd)]
            self.tensors.append((name, dims, self._int(mm, "<I"), self._int(mm, "<Q")))
        self.data_start = -(-self.pos // self.alignment) * self.alignment
        if not self.tensors:  # a split of metadata alone may end without padding
            self.data_start = min(self.data_start, self.size)
        if self.data_start > self.size:
            raise self._bad("data section past the end of the file")
        for name, _, _, off in self.tensors:
            if off >= self.size - self.data_start or off % self.alignment:
                raise self._bad(f"tensor {name.decode('utf-8', 'replace')} at a bad offset")


def _split_paths(path: str) -> Optional[List[str]]:
    name = os.path.basename(path)
    m = _SPLIT.match(name)
    if not m or int(m.group("count")) <= 1:
        return None
    d = os.path.dirname(path)
    return [os.path.join(d, name[:m.start("index")] + f"{i:05d}" + name[m.end("index"):])
            for i in range(1, int(m.group("count")) + 1)]


def local_model_path(path: str) -> str:
    """`path` itself, or for one file of a split GGUF, the joined set."""
    parts = _split_paths(path) if os.path.isfile(path) else None
    if parts is None:
        return path
    missing = [os.path.basename(p) for p in parts if not os.path.isfile(p)]
    if missing:
        raise AkunuError(f"'{path}' is one of {len(parts)} splits of a GGUF, and {', '.join(missing)} "
                         f"{'is' if len(missing) == 1 else 'are'} missing beside it")
    return join_gguf_splits(parts, path)


def join_gguf_splits(paths: Sequence[str], name: str = "") -> str:
    """One GGUF with the tensors of a split set (llama.cpp's gguf-split layout: every key in the
    first split, each split's own tensors), written once under $AKUNU_CACHE/gguf-joined and
    reused while the splits are unchanged."""
    stats = [os.stat(p) for p in paths]
    key = hashlib.sha256(json.dumps([[os.path.realpath(p), s.st_size, s.st_mtime_ns]
                                     for p, s in zip(paths, stats)]).encode()).hexdigest()[:16]
    m = _SPLIT.match(os.path.basename(paths[0]))
    out = os.path.join(akunu_cache_dir(), "gguf-joined", key, (m.group("prefix") if m else "model") + ".gguf")
    if os.path.isfile(out):
        return out
    heads = [_GGUFHeader(p) for p in paths]
    for i, h in enumerate(heads):
        if h.split_count is not None and h.split_count != len(paths):
            raise h._bad(f"split.count is {h.split_count} but the set has {len(paths)} files")
        if h.split_no is not None and h.split_no != i:
            raise h._bad(f"split.no is {h.split_no}, expected {i}")
        if h.alignment != heads[0].alignment:
            raise h._bad("its alignment differs from the first split's")
    n_tensors = sum(len(h.tensors) for h in heads)
    if heads[0].split_tensors is not None and heads[0].split_tensors != n_tensors:
        raise heads[0]._bad(f"split.tensors.count is {heads[0].split_tensors} but the splits hold {n_tensors}")
    names = [t[0] for h in heads for t in h.tensors]
    if len(set(names)) != len(names):
        raise heads[0]._bad("a tensor appears in two splits")
    align = heads[0].alignment
    kv = [raw for k, raw in heads[0].kv if not k.startswith("split.")]
    infos, bases, base = [], [], 0
    for h in heads:
        bases.append(base)
        for tname, dims, t, off in h.tensors:
            infos.append(struct.pack("<Q", len(tname)) + tname + struct.pack("<I", len(dims)) +
                         struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", t, base + off))
        base = -(-(base + h.size - h.data_start) // align) * align
    header = b"GGUF" + struct.pack("<IQQ", heads[0].version, n_tensors, len(kv)) + b"".join(kv) + b"".join(infos)
    data_start = -(-len(header) // align) * align
    total = data_start + base
    os.makedirs(os.path.dirname(out), exist_ok=True)
    free = free_bytes(os.path.dirname(out))
    if total > free:
        raise AkunuError(f"joining the {len(paths)} splits of {name or paths[0]} needs {gib(total)} but "
                         f"{os.path.dirname(out)} has {gib(free)} free: free some space or set AKUNU_CACHE to "
                         f"a larger disk")
    if sys.stderr.isatty():
        sys.stderr.write(f"akunu: joining the {len(paths)} splits of {name or paths[0]} into {out} (once)\n")
    tmp = f"{out}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(header + b"\0" * (data_start - len(header)))
            for h, b in zip(heads, bases):
                f.write(b"\0" * (data_start + b - f.tell()))
                with open(h.path, "rb") as src:
                    src.seek(h.data_start)
                    shutil.copyfileobj(src, f, 1 << 24)
            f.write(b"\0" * (total - f.tell()))
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out
