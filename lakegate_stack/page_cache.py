"""What of a local file the page cache holds, and dropping it: the benchmarks say how much of a
round's files a commit found in memory (on a VM whose memory is reclaimed, files written minutes
before are often on the disk again), and the tests check what a read-ahead hint fetched."""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
_MAP_FAILED = ctypes.c_void_p(-1).value


def cached_pages(path: str | Path) -> list[bool]:
    """Which pages of ``path`` the page cache holds: the file mapped (nothing read) and asked of
    the kernel with ``mincore`` (Python's ``mmap`` does not offer it). Empty for an empty file."""
    size = os.path.getsize(path)
    if size == 0:
        return []
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, _MAP_FAILED):
            raise OSError(ctypes.get_errno(), f"mmap {path}")
        try:
            vec = ctypes.create_string_buffer(-(-size // mmap.PAGESIZE))
            if _libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore {path}")
            return [b & 1 == 1 for b in vec.raw]
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def tail_cached(path: str | Path) -> bool:
    """Whether the page cache holds the last page of ``path`` (a Parquet file's footer ends there)."""
    pages = cached_pages(path)
    return bool(pages) and pages[-1]


def evict(path: str | Path) -> bool:
    """Drop ``path``'s pages from the page cache (written back first); False where the file
    system keeps them anyway (tmpfs) or the kernel kept some."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return not any(cached_pages(path))
