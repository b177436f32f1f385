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
    for d in model.drift:
        note = f"  ({d.note})" if d.note else ""
        lines.append(f"  {d.state.value:<8} {d.path}{note}")
        if verbose and (d.expected or d.actual):
            lines.append(f"           expected {d.expected or '-'} got {d.actual or '-'}")
        for text in changes_by_file.get(d.path, []):
            lines.append(f"           {text}")
    for f in model.findings:
        if not f.suppressed:
            lines.append(f"  {f.severity.value:<8} {f.rule} {f.path}:{f.line}: {f.message}")
    for note in model.notes:
        lines.append(f"  note: {note}")
    return lines
