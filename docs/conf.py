"""Sphinx configuration of capnb's documentation (PyData theme, MyST Markdown pages, numpydoc).

Build (warnings are errors, as CI builds it through ``tests/test_docs.py``)::

    capnb report --out reports            # the worksheets' pages, which the docs take as they are
    sphinx-build -W --keep-going -b html docs docs/_build/html

``CAPNB_DOCS_REPORT`` names another folder holding the report's pages (default: ``reports/`` at the
top of the repository). The build reads nothing from the network: no intersphinx, and the theme's
fonts and scripts are bundled with it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "_ext"))

import capnb  # noqa: E402

project = "capnb"
author = "capnb developers"
copyright = "capnb developers"
version = release = capnb.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "capnb_docs",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]
templates_path: list[str] = []

# Markdown: ```{directive}``` fences, $...$ never needed; headings get anchors for links.
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# The API reference: each public name of a module's __all__, its docstring as numpydoc renders it.
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"  # the numpydoc Parameters sections say types and units in words
autosummary_generate = False  # capnb_docs writes the API pages (one per module, from __all__)
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# The theme, entirely offline: no analytics, no external icons or fonts.
html_theme = "pydata_sphinx_theme"
html_title = f"capnb {release}"
html_static_path = ["_static"]
html_last_updated_fmt = None
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_align": "left",
    "header_links_before_dropdown": 7,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"**": ["sidebar-nav-bs"]}

# Pages the toctrees list that a checkout may not have yet (they come from other branches): their
# toctree lines are left out while the file is missing.
capnb_optional_pages = ("latency", "cluster", "safe-inputs")

# capnb_docs: where the worksheets' rendered pages come from (capnb report --out DIR).
capnb_report_dir = os.environ.get("CAPNB_DOCS_REPORT", str(ROOT / "reports"))
capnb_validation = str(ROOT / "VALIDATION.md")
