"""capnb.notebook.keep_freed_memory: a worksheet kernel reuses the pages it frees (glibc)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from capnb import notebook

# a 16-MiB table made and freed; prints how much of it the process gave back (bytes resident)
_SCRIPT = """
import resource, sys
import numpy as np
import capnb.notebook
if sys.argv[1] == "keep":
    assert capnb.notebook.keep_freed_memory()
def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()
a = np.ones(2 * 2**20)
before = resident()
del a
print(before - resident())
"""

glibc = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only"
)


def _given_back(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, mode], capture_output=True, text=True, check=True
    )
    return int(done.stdout.strip())


@glibc
def test_a_freed_table_stays_with_the_process():
    size = 16 * 2**20
    # glibc's default: the freed table goes back to the system; the next one takes new pages
    assert _given_back("default") > size * 0.9
    # kept: its pages stay with the process, for the next table
    assert _given_back("keep") < size * 0.1


@glibc
def test_setup_keeps_memory_unless_asked_not_to(monkeypatch):
    called = []
    monkeypatch.setattr(notebook, "keep_freed_memory", lambda: called.append(1) or True)
    notebook.setup(keep_memory=False)
    assert called == []
    notebook.setup()
    assert called == [1]
    monkeypatch.setenv("CAPNB_KEEP_MEMORY", "0")  # to measure without it
    notebook.setup()
    assert called == [1]
    notebook.setup(keep_memory=True)  # an explicit argument wins
    assert called == [1, 1]
