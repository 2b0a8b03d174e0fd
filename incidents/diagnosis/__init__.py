"""Diagnosis: pure functions from observations to hypotheses (docs/design.md §8).

Nothing under this package imports Django models, views, tasks, sources or the
simulator; keep this file import-free so importing a parser stays cheap.
"""
