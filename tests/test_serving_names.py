"""Which names of a model file loaded through shared code run: precise where it can be, else every name."""

from __future__ import annotations

from textwrap import dedent

from patchaudit.serving.names import NameReach, Source, name_reach

MODEL = "pkg.models.ds"
MODEL_SRC = dedent(
    """\
    import torch


    def helper(n):
        return n + 1


    def _private():
        return 2


    class Attention(torch.nn.Module):
        scale = helper(1)

        def forward(self, x):
            torch.save(x, "/tmp/x")
            return x


    class Model(torch.nn.Module):
        layer_cls = Attention

        def forward(self, x):
            return self.layer_cls()(x)


    class V3(Model):
        pass


    ALIAS = V3
    torch.ones(_private())
    """
)


def reach(importer_src: str, *, partial_importer: bool = False, model_src: str = MODEL_SRC) -> NameReach:
    sources = {
        MODEL: Source(MODEL, "pkg/models/ds.py", False, model_src.encode(), True),
        "pkg.layers.q": Source(
            "pkg.layers.q", "pkg/layers/q.py", False, dedent(importer_src).encode(), partial_importer
        ),
    }
    return name_reach(MODEL, sources, {MODEL: ["pkg.layers.q"]})


def unreached(found: NameReach) -> set[str]:
    return {name for _, _, name in found.unreached}


def line_of(needle: str) -> int:
    (number,) = [n for n, text in enumerate(MODEL_SRC.splitlines(), 1) if needle in text]
    return number


def test_a_helper_taken_leaves_the_classes_unreached() -> None:
    found = reach("from pkg.models.ds import helper\nhelper(3)\n")
    assert unreached(found) == {"Attention", "Model"}  # V3's body is `pass`: no body that runs code
    assert found.uses == ("pkg/layers/q.py:1 helper",)
    assert found.outside([line_of("torch.save")]) == ("Attention",)
    assert found.outside([line_of("torch.ones")]) is None  # module level runs
    assert found.outside([line_of("scale = helper")]) is None  # a class body runs when the class is defined
    assert found.outside([line_of("return 2")]) is None  # called at module level


def test_a_class_reached_reaches_what_it_names() -> None:
    assert unreached(reach("from pkg.models.ds import ALIAS\nALIAS()\n")) == set()
    assert unreached(reach("import pkg.models.ds as ds\nds.Model()\n")) == set()


def test_a_class_only_checked_or_annotated_runs_nothing() -> None:
    found = reach("from pkg.models.ds import Model\n\ndef f(m: Model) -> Model:\n    return isinstance(m, (Model,))\n")
    assert unreached(found) == {"Attention", "Model"} and found.uses == ()


def test_every_name_counts_where_the_use_cannot_be_told() -> None:
    for importer in (
        "from pkg.models.ds import *\n",
        "import pkg.models.ds\n",
        "import pkg.models.ds as ds\nregistry = [ds]\n",
        "import importlib\nimportlib.import_module('pkg.models.ds')\n",
        "def broken(:\n",
    ):
        found = reach(importer)
        assert found.everything is not None and found.unreached == (), importer
    dynamic = MODEL_SRC + "\nglobals()['Model']\n"
    line = len(dynamic.splitlines())
    assert (
        reach("from pkg.models.ds import helper\n", model_src=dynamic).everything
        == f"pkg/models/ds.py line {line} uses globals"
    )


def test_a_partial_importer_takes_only_what_runs_there() -> None:
    unused = "from pkg.models.ds import Model\n\n\ndef never():\n    return Model()\n"
    assert unreached(reach(unused, partial_importer=True)) == {"Attention", "Model"}
    assert unreached(reach(unused)) == set()  # shared code: whatever it names may run
    used = unused + "\nnever()\n"
    assert unreached(reach(used, partial_importer=True)) == set()


def test_a_def_registered_under_a_string_is_reached() -> None:
    registered = MODEL_SRC.replace("class Model(", '@registry.register("model")\nclass Model(')
    assert unreached(reach("from pkg.models.ds import helper\n", model_src=registered)) == set()
    compiled = MODEL_SRC.replace("class Model(", "@support_torch_compile\nclass Model(")
    assert unreached(reach("from pkg.models.ds import helper\n", model_src=compiled)) == {"Attention", "Model"}


def test_cache_round_trip() -> None:
    found = reach("from pkg.models.ds import helper\n")
    assert NameReach.from_list(found.to_list()) == found
