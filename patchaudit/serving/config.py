"""The model being served: where its config.json is, and the architectures it names."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from patchaudit.errors import ModelNotFound
from patchaudit.fs.safefs import Cap, UnreadableFile, parse_json, read_capped

CONFIG = "config.json"


@dataclass(frozen=True, kw_only=True, slots=True)
class ServedModel:
    spec: str  # as given: a directory or a repo id
    config: Path
    architectures: tuple[str, ...]  # the top-level `architectures`
    nested: tuple[tuple[str, str], ...] = ()  # (config key, architecture) of nested configs (text_config, ...)
    model_type: str | None = None


def locate(spec: str, *, cache_dir: Path | None = None) -> Path:
    """The config.json of a model directory, a hub cache repo folder or snapshot, or a repo id in the hub cache."""
    path = Path(spec).expanduser()
    if (path / CONFIG).is_file():
        return path / CONFIG
    from patchaudit.models.layout import ModelKind, resolve

    target = resolve(spec, cache_dir=cache_dir)
    if target.kind is not ModelKind.HUB_CACHE:
        raise ModelNotFound(f"{spec}: no {CONFIG} in {target.root}")
    from patchaudit.models.hubcache import read_refs, snapshot_commits

    commits = snapshot_commits(target.root)
    if target.revision is not None:
        chosen = [target.revision]
    else:
        main = read_refs(target.root).get("main", "")
        chosen = [main] if main in commits else commits
    if len(chosen) != 1:
        raise ModelNotFound(
            f"{spec}: {len(chosen)} snapshots and no refs/main naming one of them",
            hint="pass the snapshot directory itself",
        )
    config = target.root / "snapshots" / chosen[0] / CONFIG
    if not config.exists():
        raise ModelNotFound(f"{spec}: snapshot {chosen[0]} has no {CONFIG}")
    return config


def read(spec: str, *, cache_dir: Path | None = None) -> ServedModel:
    """The model `spec` names, read from its config.json (bounded; a hub snapshot's link is followed)."""
    config = locate(spec, cache_dir=cache_dir)
    try:
        data = parse_json(read_capped(config, Cap.CONFIG, follow=True))
    except UnreadableFile as exc:
        raise ModelNotFound(f"cannot read the model's config: {exc}") from None
    except ValueError as exc:
        raise ModelNotFound(f"{config}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ModelNotFound(f"{config}: not a JSON object")
    nested: list[tuple[str, str]] = []
    for key, value in data.items():
        if isinstance(value, dict):
            nested += [(key, arch) for arch in _architectures(value)]
    model_type = data.get("model_type")
    return ServedModel(
        spec=spec,
        config=config,
        architectures=tuple(_architectures(data)),
        nested=tuple(nested),
        model_type=model_type if isinstance(model_type, str) else None,
    )


def _architectures(data: dict[str, object]) -> list[str]:
    value = data.get("architectures")
    if not isinstance(value, list):
        return []
    return [a for a in value if isinstance(a, str) and a]
