"""Renderers: a Report into text for people, JSON, SARIF or the journal."""
