"""The inventory store through the plain ORM: the reference the tuned store is tested against
(tests/collectors/test_storage.py), and the store of every backend but PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import models

from collectors.models import Cluster, EntityVersion
from collectors.storage.hot_columns import check_hot_columns


class OrmStore:
    """:class:`collectors.storage.InventoryStore` by ``bulk_create`` and a queryset."""

    name = "orm"

    def insert_rows(
        self,
        model: type[models.Model],
        rows: Sequence[dict[str, Any]],
        *,
        ignore_conflicts: bool = False,
        wait_for_disk: bool = True,
    ) -> int:
        """``bulk_create``; returns the count of rows given (with ``ignore_conflicts`` the ORM does not say
        which it skipped). ``wait_for_disk`` has no ORM counterpart: every commit waits."""
        if not rows:
            return 0
        fields = {f.attname for f in model._meta.concrete_fields if not f.primary_key}
        unknown = set(rows[0]) - fields
        if unknown:
            raise TypeError(f"{model.__name__} has no field {', '.join(sorted(unknown))}")
        objs = [model(**row) for row in rows]
        model._default_manager.bulk_create(objs, batch_size=2000, ignore_conflicts=ignore_conflicts)
        return len(rows)

    def versions_at(
        self, cluster: Cluster, kinds: Sequence[str], t: datetime, **hot: str
    ) -> list[EntityVersion]:
        check_hot_columns(hot)
        return list(
            EntityVersion.objects.as_of(t)
            .filter(cluster=cluster, kind__in=list(kinds), deleted=False, **hot)
            .select_related("entity", "entity__cluster")
        )
