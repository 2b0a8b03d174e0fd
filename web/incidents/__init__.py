"""Incident pages and the JSON API."""
