"""The parallel engine: worker processes, hashing on every CPU, the stat cache, CPUs this process may use, the run's
deadline."""
