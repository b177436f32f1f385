"""Model directories the service loads: Hub cache repos, `hf download --local-dir` trees, manifest'd dirs.

Offline only: expected hashes come from the cache's own content names, the client's download metadata
and file lists, or a manifest `baseline create --model` wrote. Nothing here imports click or rich.
"""
