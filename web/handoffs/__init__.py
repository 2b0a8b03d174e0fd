"""Handoff pages."""
