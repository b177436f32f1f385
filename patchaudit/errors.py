"""The one error hierarchy: every expected failure is a PatchAuditError (exit 2); the exit codes."""

import enum


class PatchAuditError(Exception):
    """Bad input or an environment patchaudit cannot work with; the CLI prints it in one line."""

    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint


class EnvironmentNotFound(PatchAuditError):
    """The target interpreter or directory does not exist or does not answer."""


class DistributionNotFound(PatchAuditError):
    """A distribution named on the command line is not installed in the target."""


class UnsafePath(PatchAuditError):
    """A path would escape the environment's own directories."""


class NotVerifiable(PatchAuditError):
    """The installed files of a distribution cannot be checked, so nothing can be planned from them."""


class PristineNotFound(PatchAuditError):
    """No source of pristine bytes could provide the distribution."""

    tried: tuple[str, ...] = ()  # the sources asked, as messages name them


class WheelMismatch(PatchAuditError):
    """A candidate wheel is another build than the one installed."""


class InvalidPolicy(PatchAuditError):
    """A policy or baseline file is unreadable or has unknown keys."""


class LockBusy(PatchAuditError):
    """Another patchaudit run holds the environment's lock."""


class InvalidRulePack(PatchAuditError):
    """A hazard rule file or directory cannot be loaded: missing, unimportable, or a duplicate id."""


class BaselineError(PatchAuditError):
    """A baseline file is unreadable, or a patch cannot be accepted into it."""


class BaselineNotFound(BaselineError):
    """The baseline a policy or command names does not exist."""


class InvalidUnit(PatchAuditError):
    """A systemd unit name or drop-in location that patchaudit will not write."""


class QuarantineFailed(PatchAuditError):
    """The quarantine copy could not be written (full or unwritable target); nothing was changed."""


class RunNotFound(PatchAuditError):
    """A quarantine run id that does not exist in the environment."""


class RevertIncomplete(PatchAuditError):
    """A revert of the whole environment would leave drifted distributions as they are (no pristine source,
    another build) and the user did not say to go on without them; nothing was changed."""


class UnitNotFound(PatchAuditError):
    """No cgroup or unit file exists for a systemd unit on this host."""


class ExitCode(enum.IntEnum):
    """The exit status of every command (the gate's included); stable, never a count."""

    CLEAN = 0  # nothing at or above --fail-on
    PROBLEMS = 1  # drift, an unverifiable distribution, findings at or above --fail-on
    USAGE = 2  # usage or input error: a PatchAuditError, one line on stderr
    INTERNAL = 3  # a bug
    INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT


class StateRefused(PatchAuditError):
    """A journal or manifest under `<prefix>/.patchaudit/` names something no run of this environment would
    write (a path outside it, a staged file or run directory under another name); it is left as it is."""


class ModelNotFound(PatchAuditError):
    """A model directory, repo id or revision that is not on disk, or a directory of no known layout."""
