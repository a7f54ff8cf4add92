"""The on-disk cache of compiled kernels (docs/cache.md): where it lives,
and its entries as one blob to ship (save_cache_artifacts /
load_cache_artifacts, as torch.compiler's Mega-Cache).

The C runtime (src/runtime/diskcache.c) reads and writes the entries; this
module only picks the directory and moves whole entry files.  Entries carry
their own header and checksum, so a blob loaded here is verified when a
kernel is looked up, like any other entry.
"""
import os
import struct

from . import _C

_MAGIC = b"TCJITART"
_VERSION = 1
_dir = None


def default_dir():
    """``$TCJIT_CACHE_DIR/kernels``; TCJIT_CACHE_DIR defaults to
    ``${XDG_CACHE_HOME:-~/.cache}/tcjit`` (which also holds test venvs)."""
    root = os.environ.get("TCJIT_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
            os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "tcjit")
    return os.path.join(root, "kernels")


def cache_dir():
    """The directory compiled kernels are stored in."""
    return _dir


def set_cache_dir(path=None):
    """Use ``path`` (default: default_dir()) from now on."""
    global _dir
    _dir = os.path.abspath(path) if path else default_dir()
    _C.set_config(cache_dir=_dir)


def _entries():
    d = _dir
    try:
        names = sorted(os.listdir(d))
    except FileNotFoundError:
        return []
    return [n for n in names if not n.startswith(".")
            and os.path.isfile(os.path.join(d, n))]


def save_cache_artifacts():
    """Every entry of the kernel cache as one ``bytes`` blob, for
    load_cache_artifacts() in another process or on another machine (of
    the same CPU level / GPU arch and the same tcjit build)."""
    parts = [_MAGIC, struct.pack("<II", _VERSION, 0)]
    n = 0
    for name in _entries():
        try:
            with open(os.path.join(_dir, name), "rb") as f:
                data = f.read()
        except OSError:
            continue   # evicted meanwhile
        raw = name.encode()
        parts.append(struct.pack("<IQ", len(raw), len(data)))
        parts.append(raw)
        parts.append(data)
        n += 1
    parts[1] = struct.pack("<II", _VERSION, n)
    return b"".join(parts)


def load_cache_artifacts(data):
    """Install entries saved by save_cache_artifacts() into this process's
    cache directory (atomically, one file each).  Returns the number of
    entries written."""
    data = memoryview(bytes(data))
    if bytes(data[:8]) != _MAGIC:
        raise ValueError("not tcjit cache artifacts (bad magic)")
    version, n = struct.unpack_from("<II", data, 8)
    if version != _VERSION:
        raise ValueError(f"tcjit cache artifacts of format {version}, "
                         f"this tcjit reads {_VERSION}")
    os.makedirs(_dir, exist_ok=True)
    pos, written = 16, 0
    for _ in range(n):
        if pos + 12 > len(data):
            raise ValueError("tcjit cache artifacts are truncated")
        nlen, dlen = struct.unpack_from("<IQ", data, pos)
        pos += 12
        name = bytes(data[pos:pos + nlen]).decode()
        pos += nlen
        body = data[pos:pos + dlen]
        pos += dlen
        if len(body) != dlen:
            raise ValueError("tcjit cache artifacts are truncated")
        if (not name or name.startswith(".") or "/" in name
                or os.sep in name or "\0" in name):
            raise ValueError(f"bad entry name {name!r} in cache artifacts")
        tmp = os.path.join(_dir, f".tmp-load-{os.getpid()}-{name}")
        with open(tmp, "wb") as f:
            f.write(body)
        os.replace(tmp, os.path.join(_dir, name))
        written += 1
    return written


def clear_cache():
    """Delete every entry of the kernel cache directory."""
    for name in _entries():
        try:
            os.unlink(os.path.join(_dir, name))
        except FileNotFoundError:
            pass
