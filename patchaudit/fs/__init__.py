"""Files of a target, safely: the one bounded read (safefs), the one descriptor walk below a root (beneath), paths
inside a foreign tree (chase), the one atomic write of patchaudit's own files."""
