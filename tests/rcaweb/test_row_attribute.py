"""``rcaweb.row_attribute.Via``: a typed row's field is its model's, read-only, and never a dataclass field."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from rcaweb.row_attribute import Via


class Model:
    def __init__(self) -> None:
        self.title = "GPU 3 on h100-02 reports ECC errors"


@dataclass
class Row:
    model: Model
    same: int = 1
    title = Via[str]("model")


def test_reads_the_held_objects_attribute_of_the_same_name() -> None:
    m = Model()
    row = Row(m)
    assert row.title == "GPU 3 on h100-02 reports ECC errors"
    m.title = "changed"
    assert row.title == "changed"  # not a copy taken when the row was built


def test_is_not_a_dataclass_field_and_cannot_be_set() -> None:
    assert [f.name for f in dataclasses.fields(Row)] == ["model", "same"]
    with pytest.raises(TypeError):
        Row(Model(), 1, "x")  # type: ignore[call-arg]  # the point: no such parameter
    with pytest.raises(AttributeError, match="read-only"):
        Row(Model()).title = "x"  # type: ignore[misc]  # the point: refused at run time too
    assert isinstance(Row.__dict__["title"], Via)
