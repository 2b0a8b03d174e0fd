"""A listing recorded as it is mapped, a batch at a time, against one read of its kind's open versions."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from collectors.inventory import Observed, open_versions, record_states
from collectors.sweep.listing_memo import ListingMemo

if TYPE_CHECKING:
    from collectors.sweep.inventory import Sweep

BATCH = 500  # objects recorded per transaction
LISTED_BATCH = 2000  # objects of a listing (pods, jobs) mapped, then recorded, at a time


class RecordFailed(Exception):
    """Recording what a listing gave failed (the database, not the source): raised through ``Runner.call``,
    then ``cause`` is raised as the sweep's failure."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


class ListingRecorder:
    """One listing's objects, recorded as they are mapped (``LISTED_BATCH`` at a time, when ``record``) against one
    read of the kind's open versions, and kept by the memo as ``keep`` makes them once recorded: a listing's
    whole states never sit in memory together.

    An object the memo keeps in part (``Observed.partial``) is reused only while its open version's digest is
    the one kept (``reusable``): another writer, or a database put back, makes it mapped again. A listing
    that fails part way leaves the objects recorded so far (each whole) and closes nothing: only a complete
    listing says what is gone (``Sweep._absent``). Used as a context manager around the listing: once it is
    complete the memo holds what it listed (objects gone are forgotten); after a failure, nothing (some of it
    recorded or not: the next listing maps everything again)."""

    def __init__(
        self,
        sweep: Sweep,
        kind: str,
        memo: ListingMemo,
        *,
        record: bool,
        keep: Callable[[Observed], Observed],
    ) -> None:
        self.sweep, self.kind, self.memo, self.record, self.keep = sweep, kind, memo, record, keep
        self.opened = open_versions(sweep.cluster, kind) if record or memo.objects else {}
        self.listed_before = sweep.listed_before(kind) if record else None
        self.batch: list[tuple[tuple[str, str], tuple[Any, ...] | None, Observed]] = []
        self.out: list[Observed] = []
        self.fresh: dict[tuple[str, str], tuple[tuple[Any, ...], Observed]] = {}
        self.listed: set[tuple[str, str]] = set()

    def __enter__(self) -> ListingRecorder:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.memo.objects = {}  # (also when the last batch fails to record)
        if exc_type is None:
            self.flush()
            self.memo.objects = self.fresh

    def recall(self, name: tuple[str, str], mark: tuple[Any, ...] | None) -> Observed | None:
        """The object as mapped last time, when ``mark`` (None: nothing says it is unchanged) is the memo's
        and what the memo keeps in part is still the open version; then it is kept for the next listing."""
        kept = self.memo.objects.get(name) if mark is not None else None
        if kept is None or kept[0] != mark:
            return None
        if kept[1].partial and (self.opened.get(name) or (0, 0, ""))[2] != kept[1].digest:
            return None
        self.fresh[name] = kept
        return kept[1]

    def add(self, name: tuple[str, str], mark: tuple[Any, ...] | None, obs: Observed) -> None:
        """One object as listed: ``mark`` None when it is not to be remembered, or is already in ``fresh``."""
        if name in self.listed:  # a page boundary moved under the listing: the first one stands
            return
        self.listed.add(name)
        self.batch.append((name, mark, obs))
        if len(self.batch) >= LISTED_BATCH:
            self.flush()

    def flush(self) -> None:
        # (an object reused in part is recorded already: recording it again only counts it as seen)
        if self.record and self.batch:
            with self.sweep.runner.aside():
                try:
                    result = record_states(
                        self.sweep.cluster,
                        [obs for _, _, obs in self.batch],
                        self.sweep.at,
                        batch=BATCH,
                        listed_before=self.listed_before,
                        open_versions=self.opened,
                    )
                except Exception as exc:
                    raise RecordFailed(exc) from exc
            self.sweep.summary.add(result)
        for name, mark, obs in self.batch:
            kept = self.keep(obs) if self.record else obs
            if mark is not None:
                self.fresh[name] = (mark, kept)
            elif kept is not obs and name in self.fresh:  # reused whole (listed, not recorded, last time)
                self.fresh[name] = (self.fresh[name][0], kept)
            self.out.append(kept)
        self.batch.clear()
