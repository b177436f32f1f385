"""transformers-backed serving: an architecture's modeling file, through transformers' auto mappings.

vLLM builds a model with transformers when its registry maps the architecture to its Transformers
backend, or when the registry lacks it and transformers has it. transformers' auto mappings
(`transformers/models/auto/modeling_auto.py`, `*_MAPPING_NAMES = OrderedDict([(model_type, class)])`)
name the model type; the class is defined in `transformers/models/<model_type>/modeling_<model_type>.py`.
Read statically; a file that does not define the class is said, not guessed around.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from patchaudit.fs.safefs import Cap, UnreadableFile, read_capped
from patchaudit.report import Reach, ReachClass

AUTO_MAPPINGS = "transformers/models/auto/modeling_auto.py"
MODELS = "transformers/models/"


@dataclass(frozen=True, slots=True)
class HfModel:
    """The modeling file that runs (relative to the site directory) and the chain that names it."""

    path: str | None  # None: no transformers model is built (and `why` is None), or it is not known (`why`)
    via: tuple[str, ...] = ()
    why: str | None = None

    def reach_of(self, path: str, imported: Callable[[str], tuple[str, ...] | None]) -> Reach:
        """Only modeling files are one model's code; configs, tokenizers and utilities are shared.

        `imported(module)`: the chain by which the framework's code imports a module, or None.
        """
        name = path.rsplit("/", 1)[-1]
        if not (path.startswith(MODELS) and name.startswith("modeling_") and name.endswith(".py")):
            return Reach(kind=ReachClass.SHARED)
        if path.startswith(MODELS + "auto/"):
            return Reach(kind=ReachClass.SHARED)
        if self.path is not None and path == self.path:
            return Reach(kind=ReachClass.RUNS, via=self.via)
        via = imported(path[:-3].replace("/", "."))
        if via is not None:
            return Reach(kind=ReachClass.RUNS, via=via)
        if self.why is not None:
            return Reach(kind=ReachClass.UNKNOWN, why=self.why)
        return Reach(kind=ReachClass.OTHER_MODEL)


def resolve(location: str, architecture: str, lead: tuple[str, ...] = ()) -> HfModel:
    """`architecture`'s modeling file in the transformers installed at `location`; `lead`: steps before."""
    try:
        data = read_capped(f"{location}/{AUTO_MAPPINGS}", Cap.SOURCE)
        tree = ast.parse(data, AUTO_MAPPINGS)
    except (UnreadableFile, SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return HfModel(path=None, why=f"transformers' auto mappings cannot be read ({exc})")
    found: tuple[str, int] | None = None
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and node.value.args):
            continue
        items = node.value.args[0]
        if not isinstance(items, ast.List):
            continue
        for item in items.elts:
            if isinstance(item, ast.Tuple) and len(item.elts) == 2:
                key, value = item.elts
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant) and value.value == architecture:
                    found = (str(key.value), item.lineno)
                    break
        if found:
            break
    if found is None:
        return HfModel(path=None, why=f"architecture {architecture} is in neither the registry nor transformers")
    model_type, line = found
    module = model_type.replace("-", "_")
    path = f"{MODELS}{module}/modeling_{module}.py"
    try:
        source = read_capped(f"{location}/{path}", Cap.SOURCE)
    except UnreadableFile:
        return HfModel(path=None, why=f"transformers maps {architecture} to {model_type}, and {path} is not there")
    at = source.find(f"class {architecture}(".encode())
    if at < 0:
        return HfModel(path=None, why=f"{path} does not define {architecture}")
    class_line = source.count(b"\n", 0, at) + 1
    steps = (
        *lead,
        f"{AUTO_MAPPINGS}:{line} ({model_type!r}, {architecture!r})",
        f"{path}:{class_line} class {architecture}",
    )
    return HfModel(path=path, via=steps)
