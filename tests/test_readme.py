"""The README is what a newcomer reads first: its example runs, its size stays small."""

import doctest
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_stays_short_with_two_commands():
    text = README.read_text(encoding="utf-8")
    words = len(text.split())  # as `wc -w` counts them, code included
    assert words <= 1500, f"the README has {words} words; at most 1,500"
    commands = re.findall(r"^python3 -m venv .*$", text, flags=re.M)
    assert commands == [
        'python3 -m venv .venv && .venv/bin/pip install ".[notebook]" && .venv/bin/capnb report',
        'python3 -m venv .venv && .venv/bin/pip install -e ".[test]" && .venv/bin/pytest',
    ]


@pytest.mark.slow
def test_the_readme_example_prints_what_it_shows():
    """The ten-line example of planning your own service, with the figures it shows, runs."""
    result = doctest.testfile(
        str(README),
        module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        verbose=False,
    )
    assert result.attempted >= 8
    assert result.failed == 0, f"{result.failed} README example lines print something else"
