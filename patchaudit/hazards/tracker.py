"""The visitor that runs first in every batched pass: statement, scope and assignment stacks."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import libcst as cst

from patchaudit.analysis.counts import unpacked
from patchaudit.rule import FileContext, visitor_methods

__all__ = ["Tracker"]


class Tracker(cst.BatchableCSTVisitor):
    """Keeps what rules read from the context: statements, scopes, parameters, local values."""

    def __init__(self, context: FileContext) -> None:
        super().__init__()
        self.context = context
        self._main_flags: list[bool] = []

    def get_visitors(self) -> Mapping[str, Callable[[cst.CSTNode], None]]:
        return visitor_methods(self)

    def visit_If(self, node: cst.If) -> None:
        self.context.stmts.append(node)
        is_main = _is_main_guard(node.test)
        self._main_flags.append(is_main)
        if is_main:
            self.context.main_guard_depth += 1

    def leave_If(self, original_node: cst.If) -> None:
        self.context.stmts.pop()
        if self._main_flags.pop():
            self.context.main_guard_depth -= 1

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.context.stmts.append(node)
        self.context.functions.append(node.name.value)
        self.context.scope.append(("def", node.name.value))
        p = node.params
        names = [x.name.value for x in [*p.posonly_params, *p.params, *p.kwonly_params]]
        for star in (p.star_arg, p.star_kwarg):
            if isinstance(star, cst.Param):
                names.append(star.name.value)
        self.context.params.append(frozenset(names))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.context.stmts.pop()
        self.context.functions.pop()
        self.context.scope.pop()
        self.context.params.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.context.stmts.append(node)
        self.context.scope.append(("class", node.name.value))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.context.stmts.pop()
        self.context.scope.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.context.scope.append(("lambda", ""))

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.context.scope.pop()

    def _assign(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name) and self.context.functions:
            key = (tuple(self.context.scope), target.value)
            self.context.assigned.setdefault(key, []).append(value)
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and self.context.functions:
            # `self._probe = n == 5`: kept under `self._probe` (no local is spelled with a dot).
            key = (tuple(self.context.scope), f"{target.value.value}.{target.attr.value}")
            self.context.assigned.setdefault(key, []).append(value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._assign(target.target, node.value)
            pairs = unpacked(target.target, node.value) or _items(target.target, node.value)
            for name, value in pairs:
                self._assign(cst.Name(name), value)
            if not pairs and isinstance(target.target, cst.Tuple | cst.List):
                # `sampled, logprobs = self.sample(...)`: each name holds part of what the call computed.
                for element in target.target.elements:
                    self._assign(element.value, node.value)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        # `with <call> as fh`: fh holds what the call made (a rule follows a file object to its path).
        if node.asname is not None and isinstance(node.item, cst.Call):
            self._assign(node.asname.name, node.item)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._assign(node.target, node.value)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._assign(node.target, node.value)


def _items(target: cst.BaseExpression, value: cst.BaseExpression) -> list[tuple[str, cst.BaseExpression]]:
    """`fd, path = tempfile.mkstemp()`: each name holds an item of the call's result (`mkstemp()[1]`)."""
    if not isinstance(target, cst.Tuple | cst.List) or not isinstance(value, cst.Call):
        return []
    out: list[tuple[str, cst.BaseExpression]] = []
    for i, element in enumerate(target.elements):
        if isinstance(element, cst.StarredElement):
            return []
        if isinstance(element.value, cst.Name):
            index = cst.Index(cst.Integer(str(i)))
            out.append((element.value.value, cst.Subscript(value, [cst.SubscriptElement(index)])))
    return out


def _add_statement_hooks(cls: type[Tracker]) -> None:
    # libcst finds batched visitor methods by their __name__, so each gets a function of its own.
    for kind in ("SimpleStatementLine", "For", "While", "With", "Try", "TryStar", "Match"):

        def visit(self: Tracker, node: cst.CSTNode) -> None:
            self.context.stmts.append(node)

        def leave(self: Tracker, original_node: cst.CSTNode) -> None:
            self.context.stmts.pop()

        visit.__name__, leave.__name__ = f"visit_{kind}", f"leave_{kind}"
        setattr(cls, visit.__name__, visit)
        setattr(cls, leave.__name__, leave)


_add_statement_hooks(Tracker)


def _is_main_guard(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    sides = [test.left, test.comparisons[0].comparator]
    names = [s for s in sides if isinstance(s, cst.Name) and s.value == "__name__"]
    strings = [s for s in sides if isinstance(s, cst.SimpleString) and s.evaluated_value == "__main__"]
    return bool(names and strings)
