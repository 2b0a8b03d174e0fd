"""The inventory's fast paths behind one interface: write many rows, read the versions valid at t.

:class:`InventoryStore` has two implementations, chosen by :func:`inventory_store` and nowhere else:

- :class:`~collectors.storage.tuned.TunedStore`, the one the product runs: ``COPY`` for the rows on
  PostgreSQL (on SQLite, which has no ``COPY``, one prepared ``INSERT`` run for every row), hand-written SQL
  (:mod:`collectors.storage.raw_sql`) for the as-of reads on both backends;
- :class:`~collectors.storage.orm.OrmStore`, the plain ORM: the reference. tests/collectors/test_storage.py
  runs both over the same inputs and asserts the same rows and answers, on both backends.
  ``RCAWEB_INVENTORY_STORE = "orm"`` runs the product on it, to tell a fault of the fast paths from one of
  the inventory.

What the difference costs is measured by ``bench/storage.py`` (and, within the pages and sweeps,
``bench/asof.py``, ``bench/collect.py``, ``bench/model_rows.py``), written to bench/RESULTS.md, not here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings
from django.db import models

from collectors.storage.orm import OrmStore
from collectors.storage.tuned import TunedStore

if TYPE_CHECKING:
    from collectors.models import Cluster, EntityVersion


class InventoryStore(Protocol):
    name: str

    def insert_rows(
        self,
        model: type[models.Model],
        rows: Sequence[dict[str, Any]],
        *,
        ignore_conflicts: bool = False,
        wait_for_disk: bool = True,
    ) -> int:
        """Insert ``rows`` (dicts of attribute name → value; a missing key takes the field's default) into
        ``model``'s table; returns the count inserted. No primary keys come back: callers that need them read
        them back by their natural key. ``ignore_conflicts``: a row that collides with a stored one on a
        unique constraint is skipped. ``wait_for_disk=False``, for rows that are a copy of what a source still
        holds (telemetry points: the next sweep refills from the last stored one): the commit need not wait
        for the write-ahead log to reach the disk (inside a caller's transaction, that transaction's commit
        decides). A crash may then lose the last fraction of a second of such commits, never corrupt or
        half-write them."""
        ...

    def versions_at(
        self, cluster: Cluster, kinds: Sequence[str], t: datetime, **hot: str
    ) -> list[EntityVersion]:
        """The versions of ``kinds`` valid at ``t`` (not tombstones) whose hot columns equal ``hot``, each with
        its entity and the entity's cluster attached, in one query; in no particular order."""
        ...


_STORES: dict[str, InventoryStore] = {"tuned": TunedStore(), "orm": OrmStore()}


def inventory_store() -> InventoryStore:
    """The store the inventory reads and writes through: the one place the choice is made
    (``RCAWEB_INVENTORY_STORE``, default "tuned")."""
    choice = getattr(settings, "RCAWEB_INVENTORY_STORE", "tuned")
    try:
        return _STORES[choice]
    except KeyError:
        raise ValueError(f"RCAWEB_INVENTORY_STORE={choice!r}: one of {', '.join(sorted(_STORES))}") from None


def insert_rows(
    model: type[models.Model],
    rows: Sequence[dict[str, Any]],
    *,
    ignore_conflicts: bool = False,
    wait_for_disk: bool = True,
) -> int:
    """:meth:`InventoryStore.insert_rows` of the chosen store."""
    return inventory_store().insert_rows(
        model, rows, ignore_conflicts=ignore_conflicts, wait_for_disk=wait_for_disk
    )


def versions_at(cluster: Cluster, kinds: Sequence[str], t: datetime, **hot: str) -> list[EntityVersion]:
    """:meth:`InventoryStore.versions_at` of the chosen store."""
    return inventory_store().versions_at(cluster, kinds, t, **hot)


__all__ = ["InventoryStore", "OrmStore", "TunedStore", "insert_rows", "inventory_store", "versions_at"]
