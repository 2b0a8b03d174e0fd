"""Every reference resolves: documents, their sections and anchors, dotted Python paths, and the settings.

A comment that says "see docs/intake.md" or "in rcaweb.celery_schedule" is only useful while that file or
name exists. This scans the repository's own text (code, templates, docs, YAML, Makefile, .ci/run) for
references to Markdown documents (``docs/design.md``, ``ENGINE.md``, ``docs/design.md §8``,
``docs/intake.md#incident-lifecycle``) and to dotted paths into the project's packages
(``rcaweb.cursor.Cursor``), and fails on each one that points at nothing. It also imports every dotted
path the settings name (apps, middleware, backends, template libraries, handlers) and checks that every
Celery beat entry names a registered task.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import unicodedata
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {".git", ".venv", "var", "artifacts", "node_modules", "__pycache__", ".pytest_cache", "build"}
SUFFIXES = {".py", ".md", ".html", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".js", ".css"}
EXTRA_FILES = {"Makefile", "Dockerfile", "run", ".env.example"}  # run: .ci/run
PACKAGES = ("rcaweb", "collectors", "incidents", "tests", "bench")

# Documents that were once beside the repository and are now in it (docs/design.md, docs/scenarios.md,
# docs/conventions.md): a reference by the old name is dangling even where no file name is written.
RETIRED = re.compile(
    r"\bCONVENTIONS\s*(?:§|\d)|\bDESIGN\s*§|\bSCENARIOS\.md\b|\bDESIGN\.md\b|\bCONVENTIONS\.md\b"
)
MD_REF = re.compile(r"(?<![\w/.:~-])((?:\.\.?/)?(?:[\w.-]+/)*[\w-]+\.md)(?![\w(])(#[\w-]+)?(?:\s*§\s*(\d+))?")
DOTTED = re.compile(r"(?<![\w/.:@-])((?:" + "|".join(PACKAGES) + r")(?:\.[A-Za-z_]\w*)+)")
# Dotted words that are not Python paths: file names and host names.
NOT_PYTHON = re.compile(
    r"\.(?:md|py|html|jinja|ya?ml|json|txt|log|sqlite3?|org|com|net|local|example|svc|css|js|toml|sh)$"
)


def repo_files() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*")):
        rel = path.relative_to(ROOT)
        if any(part in SKIP_DIRS for part in rel.parts) or not path.is_file():
            continue
        if rel.parts[0].startswith(".") and rel.parts[0] != ".ci":
            continue
        if "fixtures" in rel.parts and path.suffix == ".json":
            continue  # recorded payloads quote other systems
        if path.suffix in SUFFIXES or path.name in EXTRA_FILES:
            yield path


@cache
def texts() -> tuple[tuple[Path, tuple[str, ...]], ...]:
    out = []
    for path in repo_files():
        try:
            out.append((path, tuple(path.read_text(encoding="utf-8").splitlines())))
        except UnicodeDecodeError:
            continue
    return tuple(out)


@cache
def md_by_name() -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for path, _ in texts():
        if path.suffix == ".md":
            out.setdefault(path.name, []).append(path)
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = unicodedata.normalize("NFKC", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def headings(path: Path) -> tuple[set[str], set[str]]:
    """(anchors, section numbers) of a Markdown file: ``## 5. The cursor`` gives ``5-the-cursor`` and ``5``."""
    anchors, numbers = set(), set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip()
        anchors.add(slug(title))
        m = re.match(r"(\d+)\.", title)
        if m:
            numbers.add(m.group(1))
    return anchors, numbers


def is_document_ref(ref: str) -> bool:
    """Whether a ``*.md`` word is meant as one of our documents.

    A path counts when it starts at a top-level entry of the repository (``docs/…``, ``collectors/…``) or
    at ``./``/``../``; other paths name files of other projects. A bare name counts when it is written in
    capitals (``README.md``, ``ENGINE.md``, ``DESIGN.md``): lower-case bare names here are URLs
    (``handoffs.md``) or attributes.
    """
    if ref.startswith(("./", "../")):
        return True
    if "/" in ref:
        return (ROOT / ref.split("/", 1)[0]).exists()
    return ref[:-3].isupper()


def resolve_md(ref: str, source: Path) -> Path | None:
    """A written document path: from the repository root or from the referring file's folder; a bare
    name: any Markdown file of the repository with that name."""
    if "/" not in ref:
        found = md_by_name().get(ref)
        return found[0] if found else None
    for base in (ROOT, source.parent):
        candidate = (base / ref).resolve()
        if candidate.is_file():
            return candidate
    return None


@cache
def resolve_dotted(dotted: str) -> str | None:
    """None when ``dotted`` names a module, an attribute chain of one, or a model (``collectors.Entity``,
    as Django's labels and migrations write them); else why not."""
    parts = dotted.split(".")
    if len(parts) == 2:
        from django.apps import apps

        try:
            apps.get_model(dotted)
            return None
        except (LookupError, ValueError):
            pass
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
                continue  # this prefix is not a module; try a shorter one
            return f"importing {module_name} fails: {exc}"
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return f"{module_name} has no {'.'.join(parts[cut:])}"
            obj = getattr(obj, attr)
        return None
    return "no such module"


def references() -> Iterator[tuple[str, str, str]]:
    """(where, reference, problem) for every dangling reference in the repository's text."""
    for path, lines in texts():
        rel = path.relative_to(ROOT)
        if rel == Path(__file__).relative_to(ROOT):
            continue  # this file spells out the retired names on purpose
        for n, line in enumerate(lines, start=1):
            where = f"{rel}:{n}"
            for m in RETIRED.finditer(line):
                yield (
                    where,
                    m.group(0),
                    "names a document that is not in the repository (see docs/design.md §11)",
                )
            for m in MD_REF.finditer(line):
                ref, anchor, section = m.group(1), m.group(2), m.group(3)
                if ref in ("DESIGN.md", "SCENARIOS.md", "CONVENTIONS.md") or not is_document_ref(ref):
                    continue  # the retired names are reported above
                target = resolve_md(ref, path)
                if target is None:
                    yield where, ref, "no such document in the repository"
                    continue
                anchors, numbers = headings(target)
                if anchor and anchor[1:] not in anchors:
                    yield where, ref + anchor, f"{target.relative_to(ROOT)} has no heading with that anchor"
                if section and section not in numbers:
                    yield where, f"{ref} §{section}", f"{target.relative_to(ROOT)} has no section {section}"
            if path.suffix not in (
                ".py",
                ".md",
                ".html",
                ".yaml",
                ".yml",
                ".toml",
            ) and path.name not in (
                "Makefile",
                "run",
            ):
                continue
            for m in DOTTED.finditer(line):
                dotted = m.group(1)
                end = m.end(1)
                if (
                    NOT_PYTHON.search(dotted)
                    or line[end : end + 1] in ("/", "-")
                    or line[end : end + 2] == ".*"
                ):
                    continue
                if line[: m.start(1)].endswith(('dispatch_uid="', "dispatch_uid='")):
                    continue  # a signal receiver's unique id, not a path
                problem = resolve_dotted(dotted)
                if problem:
                    yield where, dotted, problem


def test_every_reference_resolves() -> None:
    dangling = sorted(set(references()))
    assert not dangling, f"{len(dangling)} dangling reference(s):\n" + "\n".join(
        f"  {where}: {ref!r}: {problem}" for where, ref, problem in dangling
    )


def test_the_scan_sees_the_contracts_and_would_catch_a_dangling_reference(tmp_path: Path) -> None:
    """The scan is not vacuous: it reads the three contracts, finds their sections, and rejects bad names."""
    names = {p.relative_to(ROOT).as_posix() for p, _ in texts()}
    assert {"docs/design.md", "docs/scenarios.md", "docs/conventions.md", "Makefile", ".ci/run"} <= names
    assert {"5", "6", "8"} <= headings(ROOT / "docs" / "design.md")[1]
    assert resolve_md("docs/design.md", ROOT / "README.md") is not None
    assert resolve_md("docs/nothing-here.md", ROOT / "README.md") is None
    assert resolve_md("ENGINE.md", ROOT / "README.md") is not None
    assert is_document_ref("docs/nothing-here.md") and is_document_ref("NOTES.md")
    assert not is_document_ref("content/en/docs/page.md") and not is_document_ref("handoffs.md")
    assert resolve_dotted("collectors.Entity") is None and resolve_dotted("collectors.Nothing") is not None
    assert resolve_dotted("rcaweb.cursor.Cursor.link") is None
    assert resolve_dotted("rcaweb.celery_schedule") is not None
    assert resolve_dotted("incidents.diagnosis.codes.NO_SUCH_CODE") is not None
    line = "filled by rcaweb.celery_schedule (CONVENTIONS 18, DESIGN §3); see docs/design.md §99"
    assert [m.group(1) for m in DOTTED.finditer(line)] == ["rcaweb.celery_schedule"]
    assert len(RETIRED.findall(line)) == 2
    m = next(MD_REF.finditer(line))
    assert (m.group(1), m.group(3)) == ("docs/design.md", "99")
    assert "99" not in headings(ROOT / "docs" / "design.md")[1]


#
# Settings
#
def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def settings_paths() -> list[tuple[str, str]]:
    """(setting, dotted path) for every setting whose values are import paths."""
    out: list[tuple[str, str]] = []
    for name in ("INSTALLED_APPS", "MIDDLEWARE", "AUTHENTICATION_BACKENDS", "PASSWORD_HASHERS"):
        out += [(name, p) for p in getattr(settings, name, [])]
    for name in ("ROOT_URLCONF", "WSGI_APPLICATION", "DEFAULT_AUTO_FIELD", "TEST_RUNNER"):
        if getattr(settings, name, None):
            out.append((name, getattr(settings, name)))
    for i, t in enumerate(settings.TEMPLATES):
        out.append((f"TEMPLATES[{i}].BACKEND", t["BACKEND"]))
        opts = t.get("OPTIONS", {})
        out += [(f"TEMPLATES[{i}].context_processors", p) for p in opts.get("context_processors", [])]
        out += [(f"TEMPLATES[{i}].builtins", p) for p in opts.get("builtins", [])]
        out += [(f"TEMPLATES[{i}].libraries", p) for p in opts.get("libraries", {}).values()]
        # a loader is a name, or (name, [the loaders it wraps]); template_partials wraps the cached one
        loaders = list(opts.get("loaders", []))
        while loaders:
            loader = loaders.pop()
            if isinstance(loader, tuple | list):
                loader, wrapped = loader[0], loader[1]
                loaders += wrapped
            out.append((f"TEMPLATES[{i}].loaders", loader))
        for key in ("environment",):
            if key in opts:
                out.append((f"TEMPLATES[{i}].{key}", opts[key]))
    for alias, db in settings.DATABASES.items():
        out.append((f"DATABASES[{alias}].ENGINE", db["ENGINE"]))
    for alias, cache_conf in settings.CACHES.items():
        out.append((f"CACHES[{alias}].BACKEND", cache_conf["BACKEND"]))
    for alias, storage in getattr(settings, "STORAGES", {}).items():
        out.append((f"STORAGES[{alias}].BACKEND", storage["BACKEND"]))
    out += [
        ("AUTH_PASSWORD_VALIDATORS", v["NAME"]) for v in getattr(settings, "AUTH_PASSWORD_VALIDATORS", [])
    ]
    logging_conf = getattr(settings, "LOGGING", {}) or {}
    for section in ("handlers", "filters", "formatters"):
        for key, conf in (logging_conf.get(section) or {}).items():
            for field in ("class", "()"):
                if isinstance(conf.get(field), str) and not conf[field].startswith("ext:"):
                    out.append((f"LOGGING.{section}.{key}.{field}", conf[field]))
    # Any other setting naming one of our modules (a new setting that holds a path is checked too).
    checked = {p for _, p in out}
    for name in dir(settings):
        if name.isupper():
            for s in _strings(getattr(settings, name)):
                if s not in checked and DOTTED.fullmatch(s) and not NOT_PYTHON.search(s):
                    out.append((name, s))
    return out


def _import_path(path: str) -> str | None:
    if importlib.util.find_spec(path.split(".")[0]) is None:
        return f"{path.split('.')[0]} is not installed"
    try:
        importlib.import_module(path)
        return None
    except ImportError:
        pass
    module, _, attr = path.rpartition(".")
    try:
        obj = importlib.import_module(module)
    except ImportError as exc:
        return f"cannot import {module}: {exc}"
    return None if hasattr(obj, attr) else f"{module} has no {attr}"


def test_every_dotted_path_in_the_settings_imports() -> None:
    paths = settings_paths()
    assert len(paths) > 20 and ("MIDDLEWARE", "rcaweb.middleware.CursorMiddleware") in paths
    broken = [(name, p, why) for name, p in paths if (why := _import_path(p))]
    assert not broken, "\n".join(f"{name}: {p!r}: {why}" for name, p, why in broken)
    assert importlib.import_module(settings.ROOT_URLCONF).urlpatterns
    handler = importlib.import_module(settings.ROOT_URLCONF).handler500
    assert _import_path(handler) is None, handler


def test_every_celery_beat_entry_names_a_registered_task() -> None:
    from rcaweb.celery import app

    app.loader.import_default_modules()
    app.finalize()
    schedule = dict(app.conf.beat_schedule)
    assert {"collectors-sweep-inventory", "incidents-sweep-outbox"} <= set(schedule), schedule
    missing = {name: entry["task"] for name, entry in schedule.items() if entry["task"] not in app.tasks}
    assert not missing, f"beat entries naming no registered task: {missing}"
    for name, entry in schedule.items():
        assert _import_path(entry["task"]) is None, (name, entry["task"])
