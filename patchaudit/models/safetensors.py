"""The cheap check of a safetensors shard: its JSON header parses and its tensors tile the data exactly.

Layout: 8 bytes little-endian header length N, N bytes of JSON ({name: {dtype, shape, data_offsets}}
and an optional `__metadata__`), then the tensor data; offsets are relative to the data's start.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

HEADER_LIMIT = 100 << 20  # the safetensors library refuses larger headers
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64,
    "C64": 64,
}  # fmt: skip


def check_header(path: Path) -> str | None:
    """Why the file is not a well-formed safetensors file (None when its header and offsets hold)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        return f"cannot open: {exc.strerror}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        head = os.pread(fd, 8, 0)
        if len(head) < 8:
            return f"{st.st_size} bytes: shorter than the header length field"
        n = int.from_bytes(head, "little")
        if n > HEADER_LIMIT or 8 + n > st.st_size:
            return f"header length {n} does not fit a {st.st_size}-byte file"
        raw = os.pread(fd, n, 8)
    except OSError as exc:
        return f"cannot read: {exc.strerror}"
    finally:
        os.close(fd)
    try:
        header = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return f"header is not JSON: {exc}"
    if not isinstance(header, dict):
        return "header is not a JSON object"
    return check_tensors(header, st.st_size - 8 - n)


def check_tensors(header: dict[str, object], data_size: int) -> str | None:
    spans = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict):
            return f"tensor {name!r}: not an object"
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in DTYPE_BITS:
            return f"tensor {name!r}: unknown dtype {dtype!r}"
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):  # bool is no size
            return f"tensor {name!r}: bad shape {shape!r}"
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)):
            return f"tensor {name!r}: bad data_offsets {offsets!r}"
        begin, end = offsets
        nbytes = math.ceil(math.prod(shape) * DTYPE_BITS[str(dtype)] / 8)
        if not 0 <= begin <= end or end - begin != nbytes:
            return f"tensor {name!r}: data_offsets {offsets} do not hold {nbytes} bytes of {dtype} {shape}"
        spans.append((begin, end, name))
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            return f"tensor {name!r} starts at {begin}, expected {position} (a gap or an overlap)"
        position = end
    if position != data_size:
        return f"tensors end at byte {position} of {data_size} data bytes"
    return None
