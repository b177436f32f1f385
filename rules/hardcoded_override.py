"""hardcoded-override: a value the caller, the config or the request chose, bounded or replaced by a
constant a patch wrote into the module."""

import ast
import re
from collections.abc import Sequence

import libcst as cst

from patchaudit.rule import Example, FileContext, Rule, Severity, called_name, one_line, tuning

CLAMPS = ("torch.clamp", "torch.clip", "numpy.clip", "numpy.clamp")
CLAMP_METHODS = frozenset({"clamp", "clamp_", "clip", "clip_", "clamp_min", "clamp_max", "clamp_min_", "clamp_max_"})
BOUNDS = ("builtins.min", "builtins.max")


_ARITHMETIC = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.LShift: lambda a, b: a << b if 0 <= b < 64 else None,
    ast.RShift: lambda a, b: a >> b if 0 <= b < 64 else None,
}


def _literal(node: ast.expr | None) -> object:
    """A literal's value, or a number spelled as arithmetic of literals (`1 << 16`, `64 * 1024`)."""
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _literal(node.left), _literal(node.right)
        if isinstance(left, int | float) and isinstance(right, int | float) and not isinstance(left, bool):
            try:
                return _ARITHMETIC[type(node.op)](left, right)
            except (ArithmeticError, TypeError):
                return None
        return None
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if isinstance(node, ast.Dict) and node.keys and all(k is not None for k in node.keys):
        items = [(_literal(k), _literal(v)) for k, v in zip(node.keys, node.values, strict=True)]
        if all(isinstance(k, str | int) and isinstance(v, int | float) for k, v in items):
            return dict(items)  # `{"max_pixels": 16384 * 28 * 28}`: a table of numbers, arithmetic too
    return None


def _module_constants(tree: ast.Module) -> dict[str, object]:
    """Names bound once at module or class level to a literal number, or a dict of literals."""
    seen: dict[str, int] = {}
    found: dict[str, object] = {}
    bodies = [tree.body, *(s.body for s in tree.body if isinstance(s, ast.ClassDef))]
    for body in bodies:
        for stmt in body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target, value = stmt.targets[0], stmt.value
            elif isinstance(stmt, ast.AnnAssign):
                target, value = stmt.target, stmt.value
            else:
                continue
            if not isinstance(target, ast.Name):
                continue
            seen[target.id] = seen.get(target.id, 0) + 1
            literal = _literal(value)
            number = isinstance(literal, int | float) and not isinstance(literal, bool)
            if number or (isinstance(literal, dict) and literal):
                found[target.id] = literal
            elif (read := _env_number(value)) is not None:
                found[target.id] = read  # `float(os.getenv("K2_TEMP_FLOOR", "0.6"))`: (variable, default)
    return {name: value for name, value in found.items() if seen[name] == 1}


def _env_number(value: ast.expr | None) -> tuple[str, float] | None:
    """`float(os.getenv("K", "0.6"))`, `int(os.environ.get("K", "8"))`: the variable and its default."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("int", "float")):
        return None
    inner = value.args[0] if len(value.args) == 1 else None
    if not (isinstance(inner, ast.Call) and len(inner.args) == 2 and isinstance(inner.func, ast.Attribute)):
        return None
    if inner.func.attr not in ("getenv", "get"):
        return None
    key, default = (a.value if isinstance(a, ast.Constant) else None for a in inner.args)
    try:
        return (key, float(default)) if isinstance(key, str) and isinstance(default, str) else None
    except ValueError:
        return None


def _literal_node(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer | cst.Float | cst.SimpleString) or (
        isinstance(node, cst.Name) and node.value in ("True", "False", "None")
    )


# In-place and plain arithmetic that scales or shifts a computed tensor by a number.
SCALES = frozenset({"mul_", "div_", "add_", "sub_", "mul", "div", "add", "sub"})


class HardcodedOverride(Rule):
    ID = "hardcoded-override"
    SEVERITY = Severity.HIGH
    MESSAGE = "a chosen value bounded or replaced by a constant a patch wrote in"
    EXPLANATION = """\
A bring-up patch that pins a number in the code: `self.variance_epsilon = max(eps, _EPS_FLOOR)`,
`temp = temp.clamp(min=_MIN_TEMPERATURE)`, `[token] * min(n, _MAX_MEDIA_TOKENS)`,
`base = _THETA_OVERRIDES.get(rope_type, base)`. The value the caller, the model's config or the
request chose is overridden for every model and every request that reaches the line, by a constant
that exists nowhere but in this copy of the file; a later model gets the first one's workaround.
High in a drifted file when the constant is the patch's own: a module or class name bound once to
a literal number (or a dict of literals, for a lookup), which the distribution's text of the file
never names.

Shapes understood: `min`/`max` of a value and such a constant; `clamp`, `clamp_`, `clamp_min`,
`clamp_max`, `clip` (as methods or `torch.clamp`/`numpy.clip`) given one; a conditional expression
that compares a value with one and gives it back (`n if n <= _CAP else _CAP`); a lookup in such a
dict with the value as its default (`_OVERRIDES.get(key, value)`); such a dict merged over what
was given (`{**given, **_HIRES}`, `mm_kwargs.update(_HIRES)` of a parameter; its values may be
arithmetic of literals);
such a number put before `or` (`getattr(self, "_bench_top_k", None) or config.num_experts_per_tok`:
never false, so the config's value is never reached); a parameter rebound to one
(`eps = _EPS`); a computed value scaled or shifted by one (`probs.mul_(_RELAX)`, `x *= _SCALE`); and
a slice cut at one (`data[:_PREFIX]`). Not when the code is the distribution's with a literal of its
own given the constant's name (`topk(2)` as `topk(_GROUP_TOPK)`: a refactor).

Knowingly not: a literal written in place (`min(n, 16)`: kernel heuristics write those), a
constant upstream already had, one read from a setting or from a variable in the package's or the
serving stack's own namespace (`VLLM_...`: documented, configurable; a variable the patch made up
with a default that binds, `float(os.getenv("K2_TEMP_FLOOR", "0.6"))`, counts), and a
number a kernel is tuned by (`num_splits = min(num_splits, _MAX_SPLITS)`: picking it another way
computes the same result). Without the distribution's text (`--all-files`) nothing is said."""
    PREFILTER = (
        b"min", b"max", b"clamp", b"clip", b".get", b" if ", b"=", b"mul", b"div", b"add", b"sub", b"[", b" or", b"**",
        b"update",
    )  # fmt: skip
    NEEDS_PRISTINE = True
    CONSTANTS = True

    VALID = [
        Example(  # a literal of the distribution's own, given a name
            code="_GROUP_TOPK = 2\n\ndef score(scores):\n"
            "    return scores.topk(_GROUP_TOPK, dim=-1)[0][:_GROUP_TOPK]\n",
            pristine="def score(scores):\n    return scores.topk(2, dim=-1)[0][:2]\n",
        ),
        Example(
            code="def f(n):\n    return min(n, 16)\n",
            pristine="def f(n):\n    return n\n",
        ),
        Example(  # upstream's own bound
            code="_CAP = 64\n\ndef f(n):\n    return min(n, _CAP)\n",
            pristine="_CAP = 64\n\ndef f(n):\n    return n\n",
        ),
        Example(  # a kernel setting
            code="_MAX_SPLITS = 16\n\ndef f(num_splits):\n    num_splits = min(num_splits, _MAX_SPLITS)\n"
            "    return num_splits\n",
            pristine="def f(num_splits):\n    return num_splits\n",
        ),
        Example(  # configurable through the serving stack's own namespace (a documented setting)
            code="import os\n\n_CAP = int(os.environ.get('VLLM_CAP', '64'))\n\ndef f(n):\n    return min(n, _CAP)\n",
            pristine="import os\n\ndef f(n):\n    return n\n",
        ),
        Example(  # defaults first, what was given over them
            code="""
            _DEFAULTS = {"min_pixels": 3136, "max_pixels": 12845056}

            def call_hf_processor(self, mm_kwargs):
                prepared = {**_DEFAULTS, **mm_kwargs}
                return self.processor(**prepared)
            """,
            pristine="""
            def call_hf_processor(self, mm_kwargs):
                return self.processor(**mm_kwargs)
            """,
        ),
        Example(  # the given value first, a constant of the patch's only when it is not set
            code="""
            _TIMEOUT_S = 30

            def connect(self, timeout):
                return self.open(timeout=timeout or _TIMEOUT_S)
            """,
            pristine="""
            def connect(self, timeout):
                return self.open(timeout=timeout)
            """,
        ),
        Example(  # the patch's defaults merged into a new dict, the request's over them
            code="""
            _SAMPLING_DEFAULTS = {"top_k": 50}

            def params(self, name, request):
                merged = {}
                merged.update(_SAMPLING_DEFAULTS)
                merged.update(request)
                return {"model": name, **_SAMPLING_DEFAULTS, **merged}
            """,
            pristine="""
            def params(self, name, request):
                return {"model": name, **request}
            """,
        ),
        Example(  # a made-up variable whose default is off: the config's value unless it is set
            code="""
            import os

            _K2_TOPK = int(os.getenv("K2_TOPK", "0"))

            def build(self, config):
                return make_router(top_k=_K2_TOPK or config.top_k)
            """,
            pristine="""
            def build(self, config):
                return make_router(top_k=config.top_k)
            """,
        ),
    ]
    INVALID = [
        Example(
            code="""
            _RMS_EPS_FLOOR = 1e-5  # fp16 NaNs went away with a larger eps

            class RMSNorm:
                def __init__(self, hidden_size, eps=1e-6):
                    self.variance_epsilon = max(eps, _RMS_EPS_FLOOR)
            """,
            pristine="""
            class RMSNorm:
                def __init__(self, hidden_size, eps=1e-6):
                    self.variance_epsilon = eps
            """,
            line=5,
            message="_RMS_EPS_FLOOR",
        ),
        Example(
            code="""
            _MIN_TEMP = 0.6

            def apply_temperature(logits, temp):
                temp = temp.clamp(min=_MIN_TEMP)
                return logits.div_(temp.unsqueeze(dim=1))
            """,
            pristine="""
            def apply_temperature(logits, temp):
                return logits.div_(temp.unsqueeze(dim=1))
            """,
            line=4,
        ),
        Example(
            code="""
            _MAX_MEDIA_TOK = 4096

            def replacement(token_id, media, calc):
                n = calc(media)
                return [token_id] * (n if n <= _MAX_MEDIA_TOK else _MAX_MEDIA_TOK)
            """,
            pristine="""
            def replacement(token_id, media, calc):
                n = calc(media)
                return [token_id] * n
            """,
            line=5,
        ),
        Example(
            code="""
            _THETA_OVERRIDES = {"deepseek_yarn": 50000.0}

            def get_rope(params):
                base = params.get("rope_theta", 10000)
                kind = params.get("rope_type", "default")
                base = _THETA_OVERRIDES.get(kind, base)
                return base
            """,
            pristine="""
            def get_rope(params):
                base = params.get("rope_theta", 10000)
                kind = params.get("rope_type", "default")
                return base
            """,
            line=6,
        ),
        Example(
            code="_EPS = 1e-3\n\ndef norm(x, eps):\n    eps = _EPS\n    return x / (x.abs() + eps)\n",
            pristine="def norm(x, eps):\n    return x / (x.abs() + eps)\n",
            line=4,
        ),
        Example(
            code="""
            _ACCEPT_RELAX = 0.8  # MTP acceptance too low, relax until the head is retrained

            def rejection_sample(uniform_probs, target_probs):
                uniform_probs.mul_(_ACCEPT_RELAX)
                return uniform_probs < target_probs
            """,
            pristine="""
            def rejection_sample(uniform_probs, target_probs):
                return uniform_probs < target_probs
            """,
            line=4,
        ),
        Example(
            code="""
            _PREFIX = 1 << 16

            def hash_image(arr):
                return digest(arr.reshape(-1)[:_PREFIX])
            """,
            pristine="""
            def hash_image(arr):
                return digest(arr.reshape(-1))
            """,
            line=4,
        ),
        # "throughput A/B: route to fewer experts": the config's top-k never reached.
        Example(
            code="""
            class MoeBlock:
                _bench_top_k: int | None = 4

                def __init__(self, config):
                    self.experts = FusedMoE(top_k=getattr(self, "_bench_top_k", None) or config.num_experts_per_tok)
            """,
            pristine="""
            class MoeBlock:
                def __init__(self, config):
                    self.experts = FusedMoE(top_k=config.num_experts_per_tok)
            """,
            line=5,
            message="never reaches",
            severity=Severity.HIGH,
        ),
        # "pin a hi-res window": the request's and the config's pixel bounds overridden.
        Example(
            code="""
            _HIRES_WINDOW = {"min_pixels": 256 * 28 * 28, "max_pixels": 16384 * 28 * 28}

            def call_hf_processor(self, mm_kwargs):
                prepared = {**self._aliases(mm_kwargs), **_HIRES_WINDOW}
                return self.processor(**prepared)
            """,
            pristine="""
            def call_hf_processor(self, mm_kwargs):
                prepared = self._aliases(mm_kwargs)
                return self.processor(**prepared)
            """,
            line=4,
            message="merge",
            severity=Severity.HIGH,
        ),
    ]

    def __init__(self, context: FileContext | None = None) -> None:
        super().__init__(context)
        self._made_up: dict[str, object] | None = None

    @classmethod
    def statement_check(cls, nodes: Sequence[ast.AST]) -> bool:
        for node in nodes:
            if isinstance(node, ast.IfExp | ast.Assign | ast.AugAssign | ast.Slice):
                return True
            if isinstance(node, ast.BoolOp) or (isinstance(node, ast.Dict) and None in node.keys):
                return True  # `... or config.x`, `{**given, **_TABLE}`
            if isinstance(node, ast.Call):
                name = called_name(node.func)
                if name in ("min", "max", "get", "update") or name in CLAMP_METHODS or name in SCALES:
                    return True
        return False

    def _constants(self) -> dict[str, object]:
        """The patch's own constants: bound once at module or class level, never named upstream."""
        if self._made_up is None:
            analysis, pristine = self.context.analysis, self.context.pristine
            found = _module_constants(analysis.tree) if analysis is not None and pristine is not None else {}
            upstream = self.upstream_words()
            own = (self.context.path.replace("\\", "/").split("/")[0].upper() + "_", "VLLM_", "SGLANG_", "TORCH_")
            self._made_up = {
                name: value
                for name, value in found.items()
                if name not in upstream
                # an environment number counts when the variable is the patch's own, not a documented one
                and not (isinstance(value, tuple) and (value[0] in upstream or value[0].startswith(own)))
            }
        return self._made_up

    def _constant(self, node: cst.BaseExpression | None, dicts: bool = False) -> str | None:
        """The patch's constant a node names (`_CAP`, `self._CAP`, `Cls._CAP`, `getattr(self, "_CAP",
        None)`), else None."""
        owner = node.args[0].value if isinstance(node, cst.Call) and node.args else None
        own = isinstance(owner, cst.Name) and owner.value in ("self", "cls")
        if isinstance(node, cst.Call) and own and self.resolves_to(node, "builtins.getattr") and len(node.args) >= 2:
            spelled = node.args[1].value
            name = spelled.evaluated_value if isinstance(spelled, cst.SimpleString) else None
            node = cst.Name(name) if isinstance(name, str) and name.isidentifier() else None
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
            name = node.attr.value
        elif isinstance(node, cst.Name):
            name = node.value
        else:
            return None
        value = self._constants().get(name, None)
        if value is None or isinstance(value, dict) != dicts:
            return None
        return name

    def _tuned(self, *nodes: cst.CSTNode | None) -> bool:
        """A number a kernel is tuned by, named on either side (`num_splits = min(num_splits, _MAX)`)."""
        for node in nodes:
            spelled = cst.helpers.get_full_name_for_node(node) if node is not None else None
            if spelled and tuning(spelled):
                return True
        return False

    def _target(self) -> cst.CSTNode | None:
        stmt = self.context.stmts[-1] if self.context.stmts else None
        body = getattr(stmt, "body", None)
        small = body[0] if isinstance(body, list | tuple) and body else None
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            return small.targets[0].target
        if isinstance(small, cst.AugAssign | cst.AnnAssign):
            return small.target
        return None

    def _hoisted(self, node: cst.CSTNode, name: str) -> bool:
        """Whether the code is the distribution's with a literal of its own named (`topk(2)` as
        `topk(_GROUP_TOPK)`, `_GROUP_TOPK = 2`): a refactor, not an override."""
        value = self._constants()[name]
        if isinstance(value, dict | tuple):
            return False
        return self.upstream_code(re.sub(rf"\b{re.escape(name)}\b", repr(value), cst.Module([]).code_for_node(node)))

    def _flag(self, node: cst.CSTNode, name: str, what: str) -> None:
        if self._hoisted(node, name):
            return
        value = self._constants()[name]
        shown: object = value if not isinstance(value, dict) else "{...}"
        if isinstance(value, tuple):
            shown = f"${value[0]} or {value[1]:g}"
        self.report(
            node,
            f"{what} `{name} = {shown}`, a constant the patch wrote in: the value the caller, the config"
            " or the request chose is overridden for every one of them",
        )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.context.drifted or not self.context.functions:
            return
        func = node.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        values = [a.value for a in node.args]
        if self.resolves_to(node, BOUNDS) is not None and len(values) >= 2:
            named = [n for v in values if (n := self._constant(v)) is not None]
            others = [v for v in values if self._constant(v) is None and not isinstance(v, cst.Integer | cst.Float)]
            if named and others and not self._tuned(self._target(), *others):
                self._flag(node, named[0], f"`{cst.Module([]).code_for_node(func)}()` bounds a value by")
            return
        if method in CLAMP_METHODS or self.resolves_to(node, CLAMPS) is not None:
            named = [n for v in values if (n := self._constant(v)) is not None]
            clamped = (
                func.value
                if isinstance(func, cst.Attribute) and method in CLAMP_METHODS
                else (values[0] if values else None)
            )
            if named and not self._tuned(self._target(), clamped):
                self._flag(node, named[0], f"`{method or 'clamp'}()` bounds a value by")
            return
        if method in SCALES and len(values) == 1 and isinstance(func, cst.Attribute):
            named = self._constant(values[0])
            if named is not None and not self._tuned(self._target(), func.value):
                self._flag(node, named, f"`{method}()` changes a computed value by")
            return
        if method == "update" and len(values) == 1 and isinstance(func, cst.Attribute):
            table = self._constant(values[0], dicts=True)
            if table is not None and self.is_parameter(func.value):  # `mm_kwargs.update(_HIRES)`
                self._flag(node, table, "`update()` puts over the values given the entries of")
            return
        if method == "get" and len(values) == 2 and isinstance(func, cst.Attribute):
            table = self._constant(func.value, dicts=True)
            if table is not None and not isinstance(values[1], cst.SimpleString | cst.Integer | cst.Float):
                self._flag(node, table, "a lookup replaces a value by an entry of")

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        """`getattr(self, "_bench_top_k", None) or config.num_experts_per_tok` with `_bench_top_k = 4`:
        the constant is never false, so what the config chose is never used."""
        if not self.context.drifted or not self.context.functions or not isinstance(node.operator, cst.Or):
            return
        name = self._constant(node.left)
        if name is None or self._constant(node.right) is not None or _literal_node(node.right):
            return
        value = self._constants()[name]
        if not (value[1] if isinstance(value, tuple) else value):
            return  # `int(os.getenv("K2_TOPK", "0")) or config.top_k`: the config's unless it is set
        if not self._tuned(self._target()):  # the name it sets says what it is (`top_k=`: the model's)
            self._flag(node, name, f"`... or {one_line(node.right, 40)}` never reaches the value: it is always")

    def visit_Dict(self, node: cst.Dict) -> None:
        """`{**given, **_HIRES_WINDOW}`: the patch's table merged over what the caller gave."""
        if not self.context.drifted or not self.context.functions:
            return
        given = False  # a `**` of something not the patch's own before it: what the caller gave
        for element in node.elements:
            if not isinstance(element, cst.StarredDictElement):
                continue
            name = self._constant(element.value, dicts=True)
            if name is None:
                given = True
            elif given:
                self._flag(node, name, "a merge puts over the values given the entries of")
                return

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if not self.context.drifted or not self.context.functions:
            return
        test = node.test
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return
        sides = [test.left, test.comparisons[0].comparator]
        named = [n for s in sides if (n := self._constant(s)) is not None]
        if not named:
            return
        given = [self._constant(b) for b in (node.body, node.orelse)]
        if named[0] in given and not self._tuned(self._target(), *sides):
            self._flag(node, named[0], "a conditional value bounds a value by")

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if not self.context.drifted or not self.context.functions:
            return
        named = self._constant(node.value)
        scaled = isinstance(node.operator, cst.MultiplyAssign | cst.DivideAssign)
        if named is not None and scaled and not self._tuned(node.target):
            self._flag(node, named, "an in-place product changes a computed value by")

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """`arr.reshape(-1)[:_PREFIX]`: what the code computed, cut at a length the patch wrote in."""
        if not self.context.drifted or not self.context.functions:
            return
        for element in node.slice:
            part = element.slice
            if isinstance(part, cst.Slice):
                named = next((n for b in (part.lower, part.upper) if (n := self._constant(b)) is not None), None)
                if named is not None and not self._tuned(node.value):
                    self._flag(node, named, "a slice cuts a value at")
                    return

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self.context.drifted or not self.context.functions or len(node.targets) != 1:
            return
        target = node.targets[0].target
        name = self._constant(node.value)
        if name is not None and isinstance(target, cst.Name) and self.is_parameter(target) and not self._tuned(target):
            self._flag(node, name, f"the parameter `{target.value}` is replaced by")
