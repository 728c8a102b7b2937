"""Faults while a plan is written: the output folder holds the old files or the new ones, whole.

- two ``capnb plan`` runs into one folder at once: both succeed, and the folder holds one run's
  pair (the NetCDF file and the summary from the same plan);
- ``kill -9`` of a writer at random moments, many times: after it the folder holds the last
  committed set, whole, and no temporary of the dead writer stays (the next writer, or
  ``capnb.data.settle``, cleans it);
- a full file system (a 1 MiB tmpfs, where the machine lets a test mount one) and a file-size
  limit (``ulimit -f``): ``capnb plan`` ends with one line naming the path and exit status 1, never
  a crash (h5py used to segfault) or a partial file;
- a ``plan.json`` the user wrote is not replaced without ``--force``.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from capnb import data
from capnb.errors import OutputError

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    """Two small plan configs (different SLAs: different plans) on a two-day rate series."""
    root = tmp_path_factory.mktemp("configs")
    times = pd.date_range("2026-03-02", periods=288, freq="10min")
    qps = 40 + 20 * np.sin(2 * np.pi * np.arange(times.size) / 144)
    pd.DataFrame({"timestamp": times, "qps": qps}).to_csv(root / "rates.csv", index=False)
    paths = []
    for sla in (0.05, 0.08):
        path = root / f"plan-{sla}.toml"
        path.write_text(
            "\n".join([
                "[traffic]", 'trace = "rates.csv"', "trials = 50", "[serving]",
                'gpus = ["H100-SXM"]', "tensor_parallel = [1]", "[sla]", f"tpot_s = {sla}",
                "[elasticity]", 'policies = ["fixed"]', "scale_up_threshold = [0.7]",
                "cooldown_s = [900.0]", "step_s = 5.0", "backtest_days = 0",
            ]) + "\n"
        )  # fmt: skip
        paths.append(path)
    return paths


def _plan(config: Path, out: Path, *extra: str, limit: int | None = None, **popen):
    def limited():
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    command = [sys.executable, "-m", "capnb", "plan", "--config", str(config), "--out", str(out)]
    return subprocess.Popen(
        [*command, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=limited, **popen,
    )  # fmt: skip


def _finished(run) -> int:
    run.communicate(timeout=600)
    return run.returncode


@pytest.fixture(scope="module")
def alone(configs, tmp_path_factory) -> list[Path]:
    """Each config planned alone, once, into a folder of its own (the tests copy these).

    Planned in this process (``capnb plan``'s own entry point): the plan cache then holds both
    plans, and the commands the tests start read them back and spend their time writing.
    """
    from capnb import cli

    folders = [tmp_path_factory.mktemp(config.stem) for config in configs]
    for config, folder in zip(configs, folders, strict=True):
        assert cli.main(["plan", "--config", str(config), "--out", str(folder)]) == 0
    return folders


def _copy_of(folder: Path, to: Path) -> Path:
    """``to`` holding what a finished ``capnb plan`` left in ``folder`` (its record of outputs too)."""
    shutil.copytree(folder, to, dirs_exist_ok=True)
    return to


def _whole_pair(out: Path) -> str:
    """The text of the plan in ``out``, after checking both files are of that plan."""
    from capnb import plan

    built = plan.load(out / "plan.nc")
    summary = json.loads((out / "plan.json").read_text())
    assert summary["text"] == plan.describe(built)
    assert not [p for p in out.iterdir() if p.name.startswith(".capnb-tmp-") or ".tmp" in p.name]
    return summary["text"]


def test_two_plans_into_one_folder_both_succeed_and_one_wins_whole(configs, alone, tmp_path):
    runs = [_plan(config, tmp_path) for config in configs]
    for run in runs:
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, err
    sentences = {_whole_pair(folder) for folder in alone}  # each plan alone: both answers
    assert len(sentences) == 2  # the two plans differ, so a mixed pair would show
    assert _whole_pair(tmp_path) in sentences


def _writer(folder: Path, size: int, ready) -> None:
    """Write whole sets into ``folder`` until killed (a forked child: capnb is imported already)."""
    os.write(ready, b"ready\n")  # the kill lands inside the writes, however loaded the machine
    os.close(ready)
    for _ in range(10**6):
        body = os.urandom(size)
        summary = json.dumps({"sha256": hashlib.sha256(body).hexdigest()})
        data.write_set(folder, {"body.bin": body, "summary.json": summary})
    os._exit(0)


def _consistent(folder: Path) -> str:
    body = (folder / "body.bin").read_bytes()
    recorded = json.loads((folder / "summary.json").read_text())["sha256"]
    assert hashlib.sha256(body).hexdigest() == recorded, "a set mixed from two writes"
    return recorded


def test_kill_9_at_random_moments_leaves_a_whole_set(tmp_path):
    folder = tmp_path / "out"
    data.write_set(folder, {"body.bin": b"old", "summary.json": json.dumps(
        {"sha256": hashlib.sha256(b"old").hexdigest()})})  # fmt: skip
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(12):
        # a child process of its own (forked: no interpreter start and imports to wait for each
        # time), killed at a random moment
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(read)
            try:
                _writer(folder, 8 * 2**20, write)
            finally:
                os._exit(1)
        os.close(write)
        with os.fdopen(read, "rb") as ready:
            assert ready.readline() == b"ready\n"
        time.sleep(float(rng.uniform(0.05, 0.6)))  # inside some write: staging, commit or moves
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        data.settle(folder)  # what the next writer (or plan.load) does first
        seen.add(_consistent(folder))
        names = sorted(p.name for p in folder.iterdir())
        assert names == [".capnb-outputs.json", "body.bin", "summary.json"], names
    assert len(seen) > 1  # the writer got through some writes between kills


def test_a_file_size_limit_is_one_line_naming_the_path(configs, alone, tmp_path):
    _copy_of(alone[0], tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    run = _plan(configs[1], tmp_path, limit=64 * 1024)  # ulimit -f: 64 KiB per file
    _, err = run.communicate(timeout=600)
    assert run.returncode == 1, (run.returncode, err)  # not -SIGXFSZ, not -SIGSEGV
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "file-size limit" in lines[0] and str(tmp_path) in lines[0], err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.fixture
def tiny_file_system(tmp_path):
    """A 1 MiB tmpfs, where the machine lets this process mount one (root in a container may)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_a_full_file_system_is_one_line_naming_the_path(
    configs, alone, tiny_file_system, monkeypatch
):
    out = _copy_of(alone[0], tiny_file_system / "out")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    filler = tiny_file_system / "filler"
    free = os.statvfs(tiny_file_system).f_bavail * os.statvfs(tiny_file_system).f_frsize
    filler.write_bytes(b"\0" * (free - 4096))  # leaves less than a plan
    run = _plan(configs[1], out)
    _, err = run.communicate(timeout=600)
    assert run.returncode == 1, (run.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(out) in lines[0] and "free" in lines[0], err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # and when the space runs out during the write itself (another process filled the disk
    # after the check): the same, and the staged files are removed
    filler.unlink()
    monkeypatch.setattr(data._files, "_check_room", lambda folder, sizes: None)
    with pytest.raises(OutputError, match=r"no space left on its file system"):
        data.write_set(out, {"big.bin": b"\0" * 600_000, "bigger.bin": b"\0" * 600_000})
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_users_plan_json_is_kept_without_force(configs, tmp_path):
    (tmp_path / "plan.json").write_text('{"mine": true}\n')
    run = _plan(configs[0], tmp_path)
    _, err = run.communicate(timeout=600)
    assert run.returncode == 1 and "plan.json: exists and capnb did not write it" in err, err
    assert json.loads((tmp_path / "plan.json").read_text()) == {"mine": True}
    assert not (tmp_path / "plan.nc").exists()  # nothing of the set was written
    forced = _plan(configs[0], tmp_path, "--force")
    assert _finished(forced) == 0
    _whole_pair(tmp_path)


def test_a_dead_writers_temporaries_are_removed(tmp_path):
    data.write_set(tmp_path, {"a.txt": "1"})
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    host = data._files._tag().rsplit("-", 1)[0]
    stale = tmp_path / f".capnb-tmp-{host}-{dead}-abc"
    stale.mkdir()
    (stale / "plan.nc").write_bytes(b"partial")
    (tmp_path / ".plan.nc.tmp").write_bytes(b"an older capnb's fixed name")
    alive = tmp_path / f".capnb-tmp-{host}-{os.getpid()}-xyz"  # this process: a write under way
    alive.mkdir()
    data.write_set(tmp_path, {"a.txt": "2"})
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [".capnb-outputs.json", alive.name, "a.txt"]
