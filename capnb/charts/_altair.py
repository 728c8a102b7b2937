"""Import altair without a four-second detour through an optional jsonschema dependency."""

from __future__ import annotations

import sys

__all__ = ["load"]


def load():
    """Import and return altair, with jsonschema's optional IRI format checkers left out.

    jsonschema registers checkers for the ``iri`` formats when the optional package
    ``rfc3987-syntax`` is installed (JupyterLab's dependencies bring it), and that package builds
    an Earley parser of RFC 3987 when imported: about 4 s on a 2-core machine, paid by every kernel
    start before its first chart. altair never checks formats. So jsonschema's format module is
    imported here with ``rfc3987-syntax`` hidden, and those two checkers are not registered in this
    process; anything else can still import ``rfc3987_syntax`` itself.
    """
    if "jsonschema._format" not in sys.modules and "rfc3987_syntax" not in sys.modules:
        sys.modules["rfc3987_syntax"] = None  # importing a None entry raises ImportError
        try:
            import jsonschema._format  # noqa: F401
        except ImportError:  # pragma: no cover - jsonschema comes with altair
            pass
        finally:
            del sys.modules["rfc3987_syntax"]
    import altair

    return altair
