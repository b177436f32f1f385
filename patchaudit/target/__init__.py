"""Opening the target: where its environment lives (interpreter probe, layout, --root trees), who may write it, what
is installed (metadata, RECORD, dpkg), where its caches go."""
