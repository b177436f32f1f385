"""The rule-result cache: findings per (pack, path, installed bytes, pristine bytes)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from patchaudit.fs.safefs import UnreadableFile, read_json
from patchaudit.hazards.source import SourceFile
from patchaudit.report import Finding, Severity

__all__ = ["cache_key", "cache_read", "cache_write"]


def cache_key(file: SourceFile, version: str) -> str:
    h = hashlib.sha256()
    for part in (version.encode(), os.fsencode(file.path), b"d" if file.drifted else b"n"):
        h.update(part + b"\0")
    h.update(hashlib.sha256(file.installed).digest())
    h.update(hashlib.sha256(file.pristine).digest() if file.pristine is not None else b"-")
    return h.hexdigest()


def cache_read(cache_dir: Path, key: str, path: str) -> list[Finding] | None:
    try:
        rows = read_json(cache_dir / key[:2] / f"{key}.json")
        return [
            Finding(
                rule=r["rule"],
                severity=Severity(r["severity"]),
                path=path,
                line=r["line"],
                message=r["message"],
                in_change=r["in_change"],
                column=r["column"],
                suppressed=r["suppressed"],
            )
            for r in rows
        ]
    except (UnreadableFile, ValueError, KeyError, TypeError):
        return None


def cache_write(cache_dir: Path, key: str, findings: list[Finding]) -> None:
    rows = [
        {
            "rule": f.rule,
            "severity": f.severity.value,
            "line": f.line,
            "message": f.message,
            "in_change": f.in_change,
            "column": f.column,
            "suppressed": f.suppressed,
        }
        for f in findings
    ]
    target = cache_dir / key[:2] / f"{key}.json"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(rows))
        os.replace(tmp, target)
    except OSError:
        pass  # a cache that cannot be written only costs time
