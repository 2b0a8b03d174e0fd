"""Shift handoffs: structured notes per incident, edits kept as AuditEntry rows, Markdown export.

``services`` writes (create/edit + audit), ``markdown`` renders exports, ``views``/``urls``
serve the incident panel, ``/handoffs/`` and the ``.md`` exports.
"""
