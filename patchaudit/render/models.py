"""Plain-text lines for model reports (scan, diff) and model reverts."""

from __future__ import annotations

from patchaudit.report import ModelReport


def model_lines(model: ModelReport, *, verbose: bool = False) -> list[str]:
    where = f" @ {', '.join(r[:12] for r in model.revisions)}" if model.revisions else ""
    lines = [f"model {model.name} ({model.kind}{where}) {model.location}: {model.status.value}, "
             f"{model.files_checked} files checked"]  # fmt: skip
    changes_by_file: dict[str, list[str]] = {}
    for change in model.changes:
        changes_by_file.setdefault(change.file, []).append(change.text())
    snapshot = None
    for d in model.drift:
        note = f"  ({d.note})" if d.note else ""
        commit, shown = _in_snapshot(d.path)
        if commit is not None and commit != snapshot:
            # a hub cache's paths share their commit: name it once, then each path below it
            lines.append(f"  snapshots/{commit}/")
        snapshot = commit
        indent = "    " if commit is not None else "  "
        lines.append(f"{indent}{d.state.value:<8} {shown}{note}")
        if verbose and (d.expected or d.actual):
            lines.append(f"{indent}         expected {d.expected or '-'} got {d.actual or '-'}")
        for text in changes_by_file.get(d.path, []):
            lines.append(f"{indent}         {text}")
    for f in model.findings:
        if not f.suppressed:
            lines.append(f"  {f.severity.value:<8} {f.rule} {f.path}:{f.line}: {f.message}")
    for note in model.notes:
        lines.append(f"  note: {note}")
    return lines


def _in_snapshot(path: str) -> tuple[str | None, str]:
    """("<40-hex commit>", the rest) for a hub cache's `snapshots/<commit>/...` path, else (None, path)."""
    parts = path.split("/", 2)
    if len(parts) == 3 and parts[0] == "snapshots" and len(parts[1]) == 40 and _is_hex(parts[1]):
        return parts[1], parts[2]
    return None, path


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)
