"""The serving path (`--serve MODEL`): which drift runs for the model being served.

A layer above verify: it reads the model's config.json, the installed framework's registry and a
static import graph of the framework (never importing any of it), and annotates each drift entry and
finding of a report with its reach (annotate.py). Kept empty: the warm gate imports config.py and
argv.py to fingerprint the model, and nothing more.
"""
