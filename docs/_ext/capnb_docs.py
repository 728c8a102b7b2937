"""Sphinx extension of capnb's docs: the pages made from the package itself at build time.

- ``api/``: one page per public module, listing its ``__all__`` (written when the build starts, from
  :func:`public_modules`; the folder is not kept in git).
- ``{capnb-glossary}``: the glossary table, from :func:`capnb.glossary.describe`.
- ``{validation-section} TITLE``: a section of ``VALIDATION.md`` (the one whose heading starts with
  TITLE), as the command named in it wrote it; a section that is missing is a warning, so a build
  with ``-W`` fails, unless the directive says ``:optional:`` (then the page says it is missing).
- ``{capnb-record} MODULE.CLASS``: a record's fields with the units and meanings of their metadata.
- ``{capnb-worksheets}``: the worksheets, each linked to its page of ``capnb report``; the pages are
  copied from the folder of ``capnb_report_dir`` into ``worksheets/`` of the built site. A page
  that is missing is a warning.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
import shutil
from pathlib import Path
from types import ModuleType
from typing import ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

#: Packages under capnb whose names are not the user's API: the numba array layer the steps call
#: (each kernel is tested against a plain reference, not called by users) and the benchmarks.
INTERNAL = ("capnb.kernels", "capnb.benchmarks")

#: How the API index groups the modules (first match of a name's prefix wins).
STEPS = ("forecast", "memory", "latency", "capacity", "elasticity", "plan")
GROUPS = (
    ("The steps", tuple(f"capnb.{name}" for name in STEPS)),
    (
        "Data, records, names and errors",
        ("capnb.data", "capnb.records", "capnb.glossary", "capnb.errors"),
    ),
    (
        "Presentation",
        (
            "capnb.charts",
            "capnb.widgets",
            "capnb.notebook",
            "capnb.report",
            "capnb.memo",
            "capnb.cli",
        ),
    ),
)

WORKSHEET_FOLDER = "worksheets"


# --- the public API ------------------------------------------------------------------------------


def public_modules() -> list[ModuleType]:
    """Every module of capnb whose ``__all__`` is its public API, each once, in a stable order.

    The modules named in ``capnb.__all__`` (old names resolve to the module they alias), the
    public submodules of the packages (no leading underscore) that declare ``__all__``, and the
    top-level modules that do; the packages of :data:`INTERNAL` are left out.
    """
    import capnb

    found: dict[str, ModuleType] = {}

    def add(module: ModuleType) -> None:
        if hasattr(module, "__all__") and not module.__name__.startswith(INTERNAL):
            found.setdefault(module.__name__, module)

    for name in capnb.__all__:
        if name != "__version__":
            add(importlib.import_module(f"capnb.{name}"))
    for info in pkgutil.walk_packages(capnb.__path__, "capnb."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts) or info.name.startswith(INTERNAL):
            continue
        add(importlib.import_module(info.name))
    return sorted(found.values(), key=lambda m: m.__name__)


def kind_of(obj: object) -> str:
    """How autodoc documents a public name: module, exception, class, function or data."""
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if callable(obj):
        return "function"
    return "data"


def data_doc(module: ModuleType, name: str) -> list[str] | None:
    """The ``#:`` comment (or docstring after the assignment) of a constant, wherever it is defined.

    A package's ``__init__`` re-exports constants from its private modules, so the module itself
    is read first, then every module of its package.
    """
    candidates = [module.__name__]
    if hasattr(module, "__path__"):
        candidates += [
            i.name for i in pkgutil.walk_packages(module.__path__, module.__name__ + ".")
        ]
    for candidate in candidates:
        try:
            docs = ModuleAnalyzer.for_module(candidate).find_attr_docs()
        except PycodeError:  # a module without source has no attribute docs
            continue
        value = docs.get(("", name))
        said = value and any(line.strip() for line in value)
        if said and (candidate == module.__name__ or _defines(candidate, module, name)):
            return list(value)
    return None


def _defines(candidate: str, package: ModuleType, name: str) -> bool:
    sub = importlib.import_module(candidate)
    return name in vars(sub) and vars(sub)[name] is getattr(package, name)


def home_of(obj: object, module: ModuleType, modules: list[ModuleType]) -> str:
    """The one public module that documents a class or function several modules export.

    The public module whose name is the longest prefix of the object's ``__module__`` and whose
    ``__all__`` lists it (``capnb.capacity.SLA`` is documented as ``capnb.records.SLA``); the
    module at hand when none is.
    """
    defined = getattr(obj, "__module__", None) or ""
    owners = [
        m.__name__
        for m in modules
        if (defined == m.__name__ or defined.startswith(m.__name__ + "."))
        and any(getattr(m, n, None) is obj for n in m.__all__)
    ]
    return max(owners, key=len) if owners else module.__name__


def api_page(module: ModuleType, modules: list[ModuleType]) -> str:
    """The Markdown page of one module: its docstring, a summary table, then each public name."""
    name = module.__name__
    rst = [f".. automodule:: {name}", "   :no-members:", "", f".. currentmodule:: {name}", ""]
    kinds = {n: kind_of(getattr(module, n)) for n in module.__all__}
    homes = {
        n: home_of(getattr(module, n), module, modules)
        for n, kind in kinds.items()
        if kind in ("class", "exception", "function")
    }
    here = [n for n, home in homes.items() if home == name]
    if here:
        rst += [".. autosummary::", "   :nosignatures:", ""] + [f"   {n}" for n in here] + [""]
    elsewhere = [n for n, home in homes.items() if home != name] + [
        n for n, kind in kinds.items() if kind == "module"
    ]
    if elsewhere:
        links = []
        for n in elsewhere:
            obj = getattr(module, n)
            if kinds[n] == "module":
                links.append(f"``{n}`` (:mod:`{obj.__name__}`)")
            else:
                role = "class" if kinds[n] in ("class", "exception") else "func"
                links.append(f"``{n}`` (:{role}:`{homes[n]}.{obj.__name__}`)")
        rst += ["Also exported here: " + ", ".join(links) + ".", ""]
    for member in here:
        kind = kinds[member]
        rst += [f".. auto{kind}:: {member}"] + (["   :members:"] if kind == "class" else []) + [""]
    constants = [n for n, kind in kinds.items() if kind == "data"]
    if constants:
        rst += [".. rubric:: Constants", ""]
    for member in constants:
        rst += [f".. py:data:: {member}", f"   :value: {_short_repr(getattr(module, member))}", ""]
        rst += [f"   {line}" for line in data_doc(module, member) or []] + [""]
    return f"# `{name}`\n\n```{{eval-rst}}\n" + "\n".join(rst) + "\n```\n"


def _short_repr(obj: object) -> str:
    text = " ".join(repr(obj).split())
    return text if len(text) <= 120 else text[:117] + "..."


def api_index(modules: list[ModuleType]) -> str:
    """The API reference's index page: the modules by layer, each with its summary line."""
    lines = [
        "# API reference",
        "",
        "Every public name of capnb, generated from its docstring when the site is built. A module's",
        "public names are its `__all__`; results are xarray Datasets whose variables carry the",
        "glossary's names and units (see the {doc}`/glossary`). The numba kernels",
        "(`capnb.kernels`) and the benchmarks are not part of it: the steps call the kernels.",
        "",
    ]
    placed: set[str] = set()
    toc: list[str] = []
    for title, prefixes in (*GROUPS, ("Validation and other modules", ("capnb",))):
        members = [
            m for m in modules if m.__name__ not in placed and m.__name__.startswith(prefixes)
        ]
        if not members:
            continue
        lines += [f"## {title}", "", "| module | what it holds |", "|---|---|"]
        for m in sorted(members, key=lambda m: _group_order(m.__name__, prefixes)):
            placed.add(m.__name__)
            toc.append(m.__name__)
            summary = _markdown((inspect.getdoc(m) or "").split("\n\n")[0])
            lines.append(f"| [`{m.__name__}`]({m.__name__}.md) | {summary} |")
        lines.append("")
    lines += ["```{toctree}", ":hidden:", "", *toc, "```", ""]
    return "\n".join(lines)


def _markdown(rst: str) -> str:
    """A docstring's summary as one line of a Markdown table (roles and reST literals as code)."""
    text = re.sub(r":[\w:]+:`~?([^`]+)`", r"`\1`", rst.replace("\n", " "))
    return text.replace("``", "`").replace("|", "\\|")


def _group_order(name: str, prefixes: tuple[str, ...]) -> tuple[int, str]:
    for i, prefix in enumerate(prefixes):
        if name == prefix or name.startswith(prefix + "."):
            return i, name
    return len(prefixes), name


def write_if_changed(path: Path, text: str) -> None:
    """Write a generated page only when it changed, so Sphinx does not read it again for nothing."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)


def write_api(app: Sphinx) -> None:
    """Write ``api/`` (one page per public module and the index) before the sources are read."""
    folder = Path(app.srcdir) / "api"
    modules = public_modules()
    pages = {f"{m.__name__}.md": api_page(m, modules) for m in modules}
    pages["index.md"] = api_index(modules)
    for name, text in pages.items():
        write_if_changed(folder / name, text)
    for stale in folder.glob("*.md"):
        if stale.name not in pages:
            stale.unlink()


# --- VALIDATION.md -------------------------------------------------------------------------------


def validation_sections(path: Path) -> dict[str, list[str]]:
    """VALIDATION.md's ``##`` sections: heading text -> the lines under it (heading left out)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif line.startswith("# "):
            current = None
        elif current is not None:
            current.append(line)
    return sections


_LINK = re.compile(r"\[([^\]]+)\]\((?!https?:|mailto:|#)([^)]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")


def for_the_site(lines: list[str]) -> list[str]:
    """A section as a page can hold it.

    Links to repository files become their text (the site holds no repository files), and
    headings inside the section become bold lines.
    """
    out = []
    for line in lines:
        line = _LINK.sub(r"\1", line)
        heading = _HEADING.match(line)
        out.append(f"**{heading.group(2)}**" if heading else line)
    return out


class ValidationSection(SphinxDirective):
    """``{validation-section} TITLE``: the VALIDATION.md section whose heading starts with TITLE."""

    required_arguments = 1
    final_argument_whitespace = True
    option_spec: ClassVar[dict] = {"optional": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        """The section's body, parsed as the page's own Markdown, under a rubric naming it."""
        path = Path(self.config.capnb_validation)
        self.env.note_dependency(str(path))
        title = self.arguments[0].strip()
        matches = {k: v for k, v in validation_sections(path).items() if k.startswith(title)}
        if len(matches) != 1:
            if not matches and "optional" in self.options:
                text = self.options["optional"] or "VALIDATION.md holds no such section yet."
                para = nodes.paragraph(text=text)
                return [nodes.note("", para)]
            found = ", ".join(repr(k) for k in matches) or "none"
            logger.warning(
                f"VALIDATION.md: {len(matches)} sections start with {title!r} ({found})",
                location=self.get_location(),
            )
            return []
        ((heading, lines),) = matches.items()
        container = nodes.container(classes=["validation-section"])
        rubric = nodes.rubric(text=f"VALIDATION.md: {heading}")
        self.state.nested_parse(StringList(for_the_site(lines), source=str(path)), 0, container)
        return [rubric, container]


# --- the glossary --------------------------------------------------------------------------------


class Glossary(SphinxDirective):
    """``{capnb-glossary}``: the glossary as :func:`capnb.glossary.describe` writes it."""

    def run(self) -> list[nodes.Node]:
        """The table, parsed as Markdown."""
        from capnb import glossary

        self.env.note_dependency(glossary.__file__)
        container = nodes.container(classes=["capnb-glossary"])
        self.state.nested_parse(StringList(glossary.describe().splitlines()), 0, container)
        return [container]


# --- a record's fields ---------------------------------------------------------------------------


class Record(SphinxDirective):
    """``{capnb-record} capnb.plan.Answer``: a record's fields with their units and meanings.

    From the fields' ``units`` and ``long_name`` metadata (the record's own words), so the table
    cannot drift from the code.
    """

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        """The table of fields, parsed as Markdown."""
        import dataclasses

        module_name, _, name = self.arguments[0].rpartition(".")
        cls = getattr(importlib.import_module(module_name), name)
        self.env.note_dependency(inspect.getsourcefile(cls))
        rows = ["| field | units | meaning |", "|---|---|---|"]
        for field in dataclasses.fields(cls):
            units = field.metadata.get("units", "")
            meaning = field.metadata.get("long_name", "").replace("|", "\\|")
            rows.append(f"| `{field.name}` | {units} | {meaning} |")
        container = nodes.container(classes=["capnb-record"])
        self.state.nested_parse(StringList(rows), 0, container)
        return [container]


# --- the worksheets' pages -----------------------------------------------------------------------


def worksheets() -> list[tuple[str, str]]:
    """(name, title) of each worksheet the report runs, the title from its first heading."""
    from capnb.report import WORKSHEETS, worksheet_path

    titled = []
    for name in WORKSHEETS:
        notebook = json.loads(Path(worksheet_path(name)).read_text(encoding="utf-8"))
        heading = next(
            ("".join(c["source"]).lstrip("# ").splitlines()[0])
            for c in notebook["cells"]
            if c["cell_type"] == "markdown"
        )
        titled.append((name, heading))
    return titled


def report_pages(app: Sphinx) -> list[str]:
    """The file names the site takes from the report's folder: each worksheet's and the whole."""
    from capnb.report import REPORT_NAME, WORKSHEETS

    return [f"{name}.html" for name in WORKSHEETS] + [REPORT_NAME]


class Worksheets(SphinxDirective):
    """``{capnb-worksheets}``: a table of the worksheets, each linked to its rendered page."""

    def run(self) -> list[nodes.Node]:
        """The table, and a warning when the report's folder lacks a page."""
        from capnb.report import REPORT_NAME

        folder = Path(self.config.capnb_report_dir)
        missing = [p for p in report_pages(self.env.app) if not (folder / p).is_file()]
        if missing:
            logger.warning(
                f"the report's pages {', '.join(missing)} are not in {folder} (capnb_report_dir; "
                "set CAPNB_DOCS_REPORT or run `capnb report --out reports`)",
                location=self.get_location(),
            )
        up = "../" * self.env.docname.count("/")
        rows = ["| worksheet | rendered page | notebook |", "|---|---|---|"]
        for name, title in worksheets():
            rows.append(
                f'| {title} | <a href="{up}{WORKSHEET_FOLDER}/{name}.html">{name}.html</a> '
                f"| `notebooks/{name}.ipynb` |"
            )
        rows += [
            "",
            f'The whole report in one page: <a href="{up}{WORKSHEET_FOLDER}/{REPORT_NAME}">'
            f"{REPORT_NAME}</a>.",
        ]
        container = nodes.container(classes=["capnb-worksheets"])
        self.state.nested_parse(StringList(rows), 0, container)
        return [container]


def copy_report(app: Sphinx, exception: Exception | None) -> None:
    """Copy the report's pages into the built site (``worksheets/``)."""
    if exception is not None or app.builder.format != "html":
        return
    folder = Path(app.config.capnb_report_dir)
    target = Path(app.outdir) / WORKSHEET_FOLDER
    target.mkdir(parents=True, exist_ok=True)
    for page in report_pages(app):
        if (folder / page).is_file():
            shutil.copyfile(folder / page, target / page)


def drop_absent_pages(app: Sphinx, docname: str, source: list[str]) -> None:
    """Leave out of a toctree the optional pages (``capnb_optional_pages``) this checkout lacks.

    Pages other branches bring (``latency``, ``cluster``, ...) are listed where they belong; until
    they arrive, their toctree line is dropped (Sphinx cannot be told to let a missing entry pass).
    """
    absent = {
        page
        for page in app.config.capnb_optional_pages
        if not (Path(app.srcdir) / f"{page}.md").is_file()
    }
    if absent:
        source[0] = "\n".join(line for line in source[0].split("\n") if line.strip() not in absent)


def setup(app: Sphinx) -> dict[str, object]:
    """Register the directives, the API pages and the report's pages."""
    app.add_config_value("capnb_report_dir", "reports", "env")
    app.add_config_value("capnb_validation", "VALIDATION.md", "env")
    app.add_config_value("capnb_optional_pages", (), "env")
    app.add_directive("validation-section", ValidationSection)
    app.add_directive("capnb-glossary", Glossary)
    app.add_directive("capnb-worksheets", Worksheets)
    app.add_directive("capnb-record", Record)
    app.connect("builder-inited", write_api)
    app.connect("build-finished", copy_report)
    app.connect("source-read", drop_absent_pages)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
