"""Static analysis shared by the hazard rules: names, values."""
