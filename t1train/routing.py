"""Routing records (Go: schemas/routing), "packed" encoding only: the batch manifest promises it.

    0x01 | enc=0 | uvarint T | uvarint L | uvarint k | uvarint E | [T, L, k] ids, <u1 (E <= 256)
    or <u2 | crc32c (Castagnoli, little-endian) over everything before it

Every (token, layer) set is strictly ascending and below E.
"""

from __future__ import annotations

import numpy as np

from .errors import Refused

FORMAT_VERSION = 1
PACKED = 0
ENCODINGS = {"packed": 0, "packed+zstd": 1, "rank": 2, "delta": 3}


def dtype_for(experts: int) -> str:
    return "<u1" if experts <= 256 else "<u2"


def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def crc32c(data: bytes) -> int:
    try:  # a C implementation, where one is installed
        import crc32c as _c  # type: ignore

        return _c.crc32c(data)
    except ImportError:
        pass
    c = 0xFFFFFFFF
    t = _TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _uvarint(b: bytes, p: int) -> tuple[int, int]:
    v, shift = 0, 0
    while p < len(b) and shift < 64:
        x = b[p]
        p += 1
        v |= (x & 0x7F) << shift
        if x < 0x80:
            return v, p
        shift += 7
    raise Refused("routing record: bad uvarint in the header")


def decode_packed(record: bytes, where: str) -> np.ndarray:
    """The record's ids as an int64 array [T, L, k]; anything but a sound packed record is refused."""
    if len(record) < 6:
        raise Refused(f"{where}: routing record of {len(record)} bytes")
    body, stored = record[:-4], int.from_bytes(record[-4:], "little")
    if crc32c(body) != stored:
        raise Refused(f"{where}: routing record checksum mismatch")
    if body[0] != FORMAT_VERSION:
        raise Refused(f"{where}: routing record format version {body[0]}, this trainer reads {FORMAT_VERSION}")
    if body[1] != PACKED:
        raise Refused(f"{where}: routing record encoding {body[1]}, this trainer reads only packed (0)")
    p = 2
    dims = []
    for _ in range(4):
        v, p = _uvarint(body, p)
        dims.append(v)
    T, L, K, E = dims
    if L < 1 or K < 1 or E < 1 or K > E:
        raise Refused(f"{where}: routing record shape [{T}, {L}, {K}] of {E} experts")
    dt = np.dtype(dtype_for(E))
    payload = body[p:]
    if len(payload) != T * L * K * dt.itemsize:
        raise Refused(f"{where}: packed payload of {len(payload)} bytes, want {T * L * K * dt.itemsize}")
    ids = np.frombuffer(payload, dtype=dt).reshape(T, L, K).astype(np.int64)
    if T and K > 1 and not (np.diff(ids, axis=-1) > 0).all():
        raise Refused(f"{where}: a routing set is not strictly ascending")
    if T and ids.max() >= E:
        raise Refused(f"{where}: an expert id is outside [0, {E})")
    return ids
