"""The hazard engine: run the rule pack over files, map findings to changed lines, apply suppressions.

Rules never import from here: their one API is `patchaudit.rule`.
"""

from patchaudit.analysis.lines import pth_executable_lines
from patchaudit.hazards.batch import check_files
from patchaudit.hazards.engine import check_file
from patchaudit.hazards.engine_rules import ENGINE_RULES, PARSE_ERROR, RULE_ERROR, UNUSED_IGNORE
from patchaudit.hazards.examples import ExampleResult, run_example, run_examples
from patchaudit.hazards.loading import builtin_rules_dir, load_rules, pack_version
from patchaudit.hazards.source import SourceFile

__all__ = [
    "SourceFile",
    "check_files",
    "check_file",
    "load_rules",
    "builtin_rules_dir",
    "pack_version",
    "pth_executable_lines",
    "ExampleResult",
    "run_example",
    "run_examples",
    "PARSE_ERROR",
    "UNUSED_IGNORE",
    "RULE_ERROR",
    "ENGINE_RULES",
]
