"""The pre-start gate: policy -> audit (-> baseline) -> one verdict, failing closed.

The whole gate is core.py; a warm gate whose cached verdict still holds needs only warm.py, cache.py and
plan.py, which import no dataclass: this package's own module imports nothing, since every start pays for it.
"""
