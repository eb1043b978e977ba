"""UBJSON (Universal Binary JSON), as XGBoost writes and reads its .ubj models.

A small encoder and decoder of the JSON values a model holds (objects, arrays, strings,
numbers, booleans, null), written here rather than taken from a package: XGBoost's reader
(src/common/json.cc UBJReader) accepts only part of the format, and the encoder writes that
part: strings and object keys with an int64 ('L') length, arrays with an int64 count
(``[#L<n>``), integers in the smallest of int8/int16/int32/int64, floats as float64 ('D',
so that a daskgb model reads back bit for bit). All numbers are big-endian. The decoder
reads what XGBoost writes besides: typed arrays (``[$<type>#L<n>`` and the raw values),
float32 ('d') numbers, and the other integer markers of the specification.
"""

from __future__ import annotations

import struct

import numpy as np

# Marker -> (struct format, numpy dtype) of the fixed-size numbers.
_NUMBERS = {b"i": (">b", ">i1"), b"U": (">B", ">u1"), b"I": (">h", ">i2"), b"l": (">i", ">i4"), b"L": (">q", ">i8"),
            b"d": (">f", ">f4"), b"D": (">d", ">f8"), b"C": (">b", ">i1")}
_INTS = ((b"i", -(2 ** 7), 2 ** 7 - 1), (b"I", -(2 ** 15), 2 ** 15 - 1), (b"l", -(2 ** 31), 2 ** 31 - 1),
         (b"L", -(2 ** 63), 2 ** 63 - 1))


def looks_like_ubjson(head: bytes) -> bool:
    """Whether bytes that start with '{' are UBJSON rather than JSON text: in UBJSON the first
    key's length marker follows the brace; in JSON text a quote or white space does."""
    return len(head) >= 2 and head[:1] == b"{" and head[1:2] in (b"L", b"l", b"I", b"i", b"U", b"}")


def dumps(value) -> bytes:
    """value (dicts with string keys, lists and tuples, str, int, float, bool, None, numpy
    scalars) as UBJSON."""
    out = bytearray()
    _write(value, out)
    return bytes(out)


def _write(v, out: bytearray) -> None:
    if v is None:
        out += b"Z"
    elif isinstance(v, (bool, np.bool_)):
        out += b"T" if v else b"F"
    elif isinstance(v, (int, np.integer)):
        v = int(v)
        for marker, low, high in _INTS:
            if low <= v <= high:
                out += marker + struct.pack(_NUMBERS[marker][0], v)
                break
        else:
            raise ValueError(f"UBJSON cannot hold the integer {v}: it does not fit int64")
    elif isinstance(v, (float, np.floating)):
        out += b"D" + struct.pack(">d", float(v))
    elif isinstance(v, str):
        out += b"S"
        _write_str(v, out)
    elif isinstance(v, dict):
        out += b"{"
        for key, item in v.items():
            if not isinstance(key, str):
                raise ValueError(f"UBJSON object keys are strings, got {type(key).__name__}")
            _write_str(key, out)
            _write(item, out)
        out += b"}"
    elif isinstance(v, (list, tuple)):
        out += b"[#L" + struct.pack(">q", len(v))
        for item in v:
            _write(item, out)
    else:
        raise ValueError(f"UBJSON cannot hold a {type(v).__name__}")


def _write_str(s: str, out: bytearray) -> None:
    data = s.encode("utf-8")
    out += b"L" + struct.pack(">q", len(data)) + data


def loads(data) -> object:
    """The value UBJSON bytes hold; ValueError where they are not UBJSON (or are cut short)."""
    reader = _Reader(bytes(data))
    try:
        value = reader.value()
    except (struct.error, IndexError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"not valid UBJSON (truncated or corrupted?): {type(exc).__name__} at byte {reader.pos}") \
            from None
    if reader.pos != len(reader.data):
        raise ValueError(f"not valid UBJSON: {len(reader.data) - reader.pos} bytes after the value")
    return value


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def marker(self) -> bytes:
        while True:
            m = self.data[self.pos : self.pos + 1]
            if not m:
                raise IndexError("end of data")
            self.pos += 1
            if m != b"N":  # no-op
                return m

    def number(self, marker: bytes):
        fmt = _NUMBERS[marker][0]
        size = struct.calcsize(fmt)
        (v,) = struct.unpack(fmt, self.data[self.pos : self.pos + size])
        self.pos += size
        return v

    def length(self) -> int:
        marker = self.marker()
        if marker not in _NUMBERS or marker in (b"d", b"D", b"C"):
            raise ValueError(f"not valid UBJSON: a length with marker {marker!r} at byte {self.pos - 1}")
        n = self.number(marker)
        if n < 0:
            raise ValueError(f"not valid UBJSON: a negative length at byte {self.pos}")
        return n

    def string(self) -> str:
        n = self.length()
        if self.pos + n > len(self.data):
            raise IndexError("end of data")
        s = self.data[self.pos : self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, marker: bytes | None = None):
        m = marker or self.marker()
        if m == b"Z":
            return None
        if m == b"T":
            return True
        if m == b"F":
            return False
        if m in _NUMBERS:
            v = self.number(m)
            return float(v) if m in (b"d", b"D") else int(v)
        if m == b"H":  # a high-precision number, as its decimal text
            text = self.string()
            return float(text) if any(c in text for c in ".eE") else int(text)
        if m == b"S":
            return self.string()
        if m == b"{":
            return self.container(b"}", keyed=True)
        if m == b"[":
            return self.container(b"]", keyed=False)
        raise ValueError(f"not valid UBJSON: unknown marker {m!r} at byte {self.pos - 1}")

    def container(self, end: bytes, keyed: bool):
        kind, count = None, None
        if self.data[self.pos : self.pos + 1] == b"$":
            self.pos += 1
            kind = self.marker()
            if self.marker() != b"#":
                raise ValueError(f"not valid UBJSON: a typed container without a count at byte {self.pos - 1}")
            count = self.length()
        elif self.data[self.pos : self.pos + 1] == b"#":
            self.pos += 1
            count = self.length()
        if not keyed and kind is not None and kind in _NUMBERS:  # a typed array of numbers: read at once
            dtype = np.dtype(_NUMBERS[kind][1])
            size = count * dtype.itemsize
            if self.pos + size > len(self.data):
                raise IndexError("end of data")
            values = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.pos)
            self.pos += size
            return values.astype(dtype.newbyteorder("=")).tolist()
        items = {} if keyed else []
        i = 0
        while True:
            if count is None:
                if self.data[self.pos : self.pos + 1] == end:
                    self.pos += 1
                    return items
            elif i == count:
                return items
            if keyed:
                key = self.string()
                items[key] = self.value(kind)
            else:
                items.append(self.value(kind))
            i += 1
