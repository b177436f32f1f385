"""Checking bytes: RECORD, git and dpkg md5sums against disk -> drift; ownership and added files, startup hooks,
packaging facts, errata, bytecode; one audit of an environment."""
