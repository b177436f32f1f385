"""patchaudit: verify an installed Python environment against what its distributions shipped."""

__version__ = "0.1.0"
