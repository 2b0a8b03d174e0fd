"""``Via``: a typed row's read-only attribute that is the same-named attribute of the object it holds.

The pages hand their templates typed rows (``web/inventory/rows.py``, ``HandoffRow``, the incident page's
related incidents) that keep a model object and show a few of its fields under the same names, so the
templates read ``row.title`` as they read ``incident.title``. One descriptor says that once per field instead
of a property each::

    @dataclass
    class HandoffRow:
        incident: Incident
        title = Via[str]("incident")

Left unannotated on purpose: an annotated class attribute would become a dataclass field.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class Via(Generic[T]):
    """``row.<name>`` is ``row.<holder>.<name>``; read-only (a row shows its model, it never edits it)."""

    def __init__(self, holder: str) -> None:
        self.holder = holder
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Via[T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(getattr(obj, self.holder), self.name)

    def __set__(self, obj: object, value: Any) -> None:
        raise AttributeError(f"{self.name} is read-only: it is the {self.holder}'s")
