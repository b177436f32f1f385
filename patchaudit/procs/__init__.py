"""Running processes: which Python processes still run code that changed since they started
(`patchaudit ps`), and the environment a systemd unit gives its service."""
