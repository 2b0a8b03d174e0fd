"""The console: every page, template tag and URL (docs/design.md §3)."""
