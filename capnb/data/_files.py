"""Writing files whole: a report, an exported plan or a config never half written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write a text file whole or not at all: a temporary file beside it, renamed over it.

    A failure leaves the old file (or no file) and no temporary behind. The file gets the usual
    permissions of a new file (the umask's), not the temporary file's private ones.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; a report is for sharing
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_section(path: str | os.PathLike, section: str) -> Path:
    """Replace one ``##`` section of a Markdown file (or append it), leaving the others alone.

    ``section`` starts with its own ``##`` heading line; the section it replaces runs from the
    line equal to that heading to the next ``##`` heading. Written whole (:func:`write_atomic`).
    """
    path = Path(path)
    heading = section.splitlines()[0].strip()
    if not heading.startswith("## "):
        raise ValueError(f"section must start with a '## ' heading, got {heading!r}")
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
    if start is None:
        joiner = (
            "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        )
        return write_atomic(path, text + joiner + section)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    tail = "".join(lines[end:])
    return write_atomic(path, "".join(lines[:start]) + section + ("\n" + tail if tail else ""))
