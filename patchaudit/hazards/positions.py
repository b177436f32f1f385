"""Where a libcst node lies in the code generated for it: PositionProvider's answer, at a quarter of its cost.

libcst's PositionProvider generates the code with a state that records, for every node, a
`CodeRange` of two `CodePosition`s (frozen dataclasses, three per node) and splits every token with
a pattern to count its lines. A finding needs the positions of a few nodes. `_Tracked` is the same
walk of libcst's own code generation (`Module._codegen`), keeping the same positions as plain
(line, column) pairs: whitespace-inclusive for every node, then the syntactic ones where a node
records them (`record_syntactic_position`, its start or end taken from a child's where it says so),
exactly as PositionProvider does. The tests compare the two on real modules, node by node.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import libcst as cst
from libcst._nodes.internal import CodegenState

__all__ = ["Point", "Span", "spans"]

Point = tuple[int, int]  # line (from 1), column (from 0)
Span = tuple[Point, Point]  # start, end


class _Tracked(CodegenState):
    """Code generation that keeps each node's position (PositionProvidingCodegenState's, as pairs)."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.line = 1
        self.column = 0
        self.starts: list[Point] = []
        self.found: dict[cst.CSTNode, Span] = {}

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self._move(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self._move(value)

    def _move(self, value: str) -> None:
        if "\n" in value or "\r" in value:  # `\r\n`, `\r` and `\n` each end a line
            lines = value.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            self.line += len(lines) - 1
            self.column = len(lines[-1])
        else:
            self.column += len(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.starts.append((self.line, self.column))

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self.starts.pop()
        if node not in self.found:  # a syntactic position recorded inside is kept
            self.found[node] = (start, (self.line, self.column))

    @contextmanager
    def record_syntactic_position(
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> Iterator[None]:
        start = (self.line, self.column)
        try:
            yield
        finally:
            end = (self.line, self.column)
            if start_node is not None:
                start = self.found[start_node][0]
            if end_node is not None:
                end = self.found[end_node][1]
            self.found[node] = (start, end)


def spans(module: cst.Module) -> dict[cst.CSTNode, Span]:
    """Every node of the module -> its span, as PositionProvider gives it."""
    state = _Tracked(module)
    module._codegen(state)
    return state.found
