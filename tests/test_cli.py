"""The capnb command: config, plan and report, and how they fail."""

import json

import pytest

from capnb.cli import main
from capnb.plan import PlanConfig, load_config


def test_config_writes_the_default_plan_config(tmp_path, capsys):
    path = tmp_path / "plan.toml"
    assert main(["config", str(path)]) == 0
    assert load_config(path) == PlanConfig()
    assert "capnb plan --config" in capsys.readouterr().out


def test_every_flag_of_every_command_says_what_it_takes():
    # capnb plan --help listed "--trace-kind {auto,requests,rates}" with no word of what it
    # decides, and the plan command no description: a newcomer has --help alone
    from capnb.cli import _parser

    commands = _parser()._subparsers._group_actions[0].choices
    bare = [f"{name} {action.option_strings or action.dest}"
            for name, command in commands.items() for action in command._actions
            if not action.help]  # fmt: skip
    assert bare == []
    assert all(command.description for command in commands.values())


def test_config_prints_commands_that_run_as_printed(tmp_path, capsys):
    # a path with a space was printed bare: `capnb plan --config my plan.toml` runs on 'my'
    import shlex

    path = tmp_path / "my plan.toml"
    assert main(["config", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"`capnb plan --config {shlex.quote(str(path))}`" in out


@pytest.mark.slow
def test_plan_prints_the_recommendation_and_exports(small_plan, tmp_path, capsys):
    path = small_plan
    assert main(["plan", "--config", str(path), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert out.startswith(summary["text"])  # the answer as describe() renders it, then the inputs
    assert f"Inputs: {summary['answer']['inputs']}" in out
    assert (tmp_path / "out" / "plan.nc").is_file()


def test_a_plan_is_written_though_its_reader_closed_the_output(tmp_path, monkeypatch):
    # `capnb plan ... | head -1`: the answer was printed before the files were written, so a
    # reader that stopped early (a broken pipe) ended the run with no plan.nc or plan.json
    import io
    import sys

    import numpy as np
    import pandas as pd

    times = pd.date_range("2026-03-02", periods=288, freq="10min")
    qps = 40 + 20 * np.sin(2 * np.pi * np.arange(times.size) / 144)
    pd.DataFrame({"timestamp": times, "qps": qps}).to_csv(tmp_path / "rates.csv", index=False)
    config = tmp_path / "plan.toml"
    config.write_text(
        '[traffic]\ntrace = "rates.csv"\ntrials = 50\n[serving]\ngpus = ["H100-SXM"]\n'
        'tensor_parallel = [1]\n[elasticity]\npolicies = ["fixed"]\nbacktest_days = 0\n'
    )

    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert main(["plan", "--config", str(config), "--out", str(tmp_path / "out")]) == 1
    assert (tmp_path / "out" / "plan.nc").is_file() and (tmp_path / "out" / "plan.json").is_file()


def test_the_sla_flag_takes_bounds_with_units_and_names_a_slip(capsys):
    from capnb import cli
    from capnb.records import SLA

    args = cli._parser().parse_args(["plan", "--sla", "ttft=1.5,tpot=60ms"])
    assert cli._overrides(args) == {"sla": SLA(ttft_s=1.5, tpot_s=0.06)}
    with pytest.raises(SystemExit):  # a TPOT of 60 s: seconds meant as milliseconds
        cli._parser().parse_args(["plan", "--sla", "tpot=60"])
    err = capsys.readouterr().err
    assert "argument --sla: tpot_s = 60" in err and "60 ms is 0.06" in err
    args = cli._parser().parse_args(["plan", "--sla", "tpot=60,confirm"])
    assert cli._overrides(args)["sla"].bounds == {"tpot": 60.0}
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["plan", "--sla", "latency=1"])
    assert "expected metric=seconds" in capsys.readouterr().err


def test_the_sla_flag_refuses_a_bound_given_twice(capsys):
    # "ttft=1.5,ttft=2" planned on 2 s, the last one, without a word
    from capnb import cli
    from capnb.errors import InputError
    from capnb.records import SLA

    for text in (
        "ttft=1.5,ttft=2",
        "TTFT=1.5, tpot=60ms, ttft=1500ms",
        "ttft=1,quantile=0.9,quantile=0.95",
    ):
        with pytest.raises(InputError, match="given twice"):
            SLA.parse(text)
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["plan", "--sla", "ttft=1.5,ttft=2"])
    assert "ttft is given twice" in capsys.readouterr().err


def test_failures_print_the_step_and_exit_1(tmp_path, capsys):
    path = tmp_path / "plan.toml"
    path.write_text('[traffic]\ntrace = "nope"\n')
    assert main(["plan", "--config", str(path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("capnb plan: the forecast step failed") and "trace='nope'" in err
    assert not (tmp_path / "out").exists()
    path.write_text("[sla]\nseconds = 1\n")
    assert main(["plan", "--config", str(path)]) == 1
    assert "[sla] has no setting 'seconds'" in capsys.readouterr().err
    # a flag's slip is said to come from the command line (the user called no replace())
    assert main(["plan", "--model", "NoSuchModel"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("capnb plan: defaults: command line: model = 'NoSuchModel'"), err


def test_a_failed_plan_says_the_plan_files_already_in_out_are_an_earlier_plans(
    small_plan, tmp_path, capsys
):
    # an infeasible run writes nothing; the files of the last good run stay, and capnb export
    # would export that plan: said beside the failure
    out = tmp_path / "out"
    assert main(["plan", "--config", str(small_plan), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["plan", "--config", str(small_plan), "--out", str(out), "--sla",
                 "ttft=10ms,tpot=5ms"]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert err.startswith("capnb plan: infeasible") or "infeasible" in err.splitlines()[0], err
    assert "plan.nc, plan.json" in err and "an earlier plan's, left as they were" in err
    # with no earlier files, the failure alone
    assert main(["plan", "--config", str(small_plan), "--out", str(tmp_path / "new"), "--sla",
                 "ttft=10ms,tpot=5ms"]) == 1  # fmt: skip
    assert "earlier plan" not in capsys.readouterr().err


def test_a_failed_plan_does_not_call_a_file_that_is_no_plan_an_earlier_plan(tmp_path, capsys):
    # found by an outside pass: a plan.json that is not a plan, in --out, was said to be "an
    # earlier plan's ... (capnb export would export that plan)", "plan.json ... are"
    out = tmp_path / "out"
    out.mkdir()
    (out / "plan.json").write_text('{"hello": 1}')
    assert main(["plan", "--out", str(out), "--force", "--gpus", "L4", "--model",
                 "Llama-3.1-70B"]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "infeasible" in err, err
    assert "earlier plan" not in err and "would export" not in err, err
    assert (f"plan.json in {out} is left as it was, not written by this run: plan.json is not a "
            "plan capnb export reads") in err, err  # fmt: skip
    assert (out / "plan.json").read_text() == '{"hello": 1}'


@pytest.mark.parametrize("flag", ["--model", "--trace", "--benchmark"])
def test_an_empty_path_flag_is_refused_as_empty_not_read_as_the_current_folder(
    flag, tmp_path, capsys, monkeypatch
):
    # --model= (an unset shell variable) was read as the current folder: "/home/me: a model
    # folder needs a config.json", a trace "a folder, not a trace file"
    monkeypatch.chdir(tmp_path)
    setting = {"--benchmark": "latency"}.get(flag, flag[2:])
    assert main(["plan", f"{flag}=", "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert f"command line: {setting} = '': String should have at least 1 character" in err, err
    assert str(tmp_path) not in err and not (tmp_path / "out").exists()


def test_the_trace_loaders_options_are_flags_of_plan():
    import argparse

    from capnb import cli

    seen = {}

    def grab(args: argparse.Namespace) -> int:
        seen.update(cli._overrides(args))
        return 0

    parser = cli._parser()
    args = parser.parse_args(["plan", "--trace", "t.csv", "--time-unit", "s", "--timezone",
                              "Europe/Berlin", "--time-column", "Timestamp", "--start",
                              "2024-05-01 00:00", "--interval", "15min",
                              "--prompt-column", "in"])  # fmt: skip
    grab(args)
    # --interval: found planning a 15-minute rate series from the command line, which the
    # default 10-minute interval cannot cut and no flag could change
    assert seen == {"trace": "t.csv", "time_unit": "s", "timezone": "Europe/Berlin",
                    "time_column": "Timestamp", "start": "2024-05-01 00:00", "prompt_column": "in",
                    "interval": "15min"}  # fmt: skip
    with pytest.raises(SystemExit):
        parser.parse_args(["plan", "--time-unit", "minutes"])


def test_warnings_print_as_one_line_of_the_commands_output():
    import warnings

    from capnb import cli
    from capnb.data import TraceWarning

    with warnings.catch_warnings():
        warnings.formatwarning = cli._one_line
        text = warnings.formatwarning("rows sorted", TraceWarning, "/x/_traces.py", 12)
    assert text == "capnb: TraceWarning: rows sorted\n"


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("plan.json", b"not json", "not a plan.json (not JSON: Expecting value at line 1"),
        ("plan.json", b"[1, 2]", "not a capnb plan (it carries no answer)"),
        ("plan.json", b'{"answer": 3}', "not a capnb plan (it carries no answer)"),
        ("plan.json", b"\xff\xfe{\x00}\x00", "UTF-16 text"),
        ("plan.nc", b"garbage", "not a plan file capnb wrote (not NetCDF"),
        # an answer without its fields, or with a record that is not one, ended in
        # "TypeError: Answer.__init__() missing 51 required positional arguments: ..."
        ("plan.json", b'{"answer": {}}', "its answer has no 'model'"),
        ("plan.json", b'{"answer": {"model": "x", "colour": 1}}', "'colour' is not a field"),
        # "capnb export: RecursionError: maximum recursion depth exceeded while decoding ..."
        ("plan.json", b"[" * 100_000 + b"]" * 100_000, "not a plan.json (JSON nested too deeply)"),
        # "capnb export: ValueError: Exceeds the limit (4300 digits) for integer string ..."
        ("plan.json", b'{"answer": 1' + b"0" * 5000 + b"}", "a number of more than 4,300 digits"),
        # a plan config (capnb config plan.toml) read as NetCDF: "not NetCDF: Unable to
        # synchronously open file (file signature not found)"
        ("plan.toml", b'[serving]\ngpus = ["H200"]\n', "a plan config, not a plan: run capnb plan"),
        ("plan.yaml", b"serving:\n  gpus: [H200]\n", "a plan config, not a plan: run capnb plan"),
    ],
)
def test_export_names_the_plan_file_it_cannot_read(tmp_path, capsys, name, content, said):
    # these ended in "capnb export: JSONDecodeError: ...", "AttributeError: 'list' object has no
    # attribute 'attrs'" or h5py's "OSError: ... file signature not found", naming no file
    path = tmp_path / name
    path.write_bytes(content)
    assert main(["export", "--plan", str(path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"capnb export: {path}: ") and said in err, err
    assert "Error:" not in err and not (tmp_path / "out").exists()


def test_export_of_a_plan_json_reads_the_set_a_killed_writer_committed(tmp_path, capsys):
    # a plan run stopped (Ctrl-C, kill) after its set was committed but before its files were
    # moved into place: capnb export --plan plan.nc read the new plan (load settles the folder)
    # while --plan plan.json read the earlier run's plan.json, a plan the user no longer has
    from test_config import write_set_interrupted

    from capnb.data import _files, write_set

    write_set(tmp_path, {"plan.json": "{not json", "plan.nc": b"earlier"})
    write_set_interrupted(tmp_path, {"plan.json": '{"answer": {}}', "plan.nc": b"this run"})
    path = tmp_path / "plan.json"
    assert main(["export", "--plan", str(path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "its answer has no 'model'" in err, err  # this run's plan.json, not "not JSON"
    assert (tmp_path / "plan.nc").read_bytes() == b"this run"
    assert not (tmp_path / _files._COMMIT).exists()


def test_export_names_a_plan_nc_whose_answer_is_not_json(tmp_path, capsys):
    # a plan.nc whose answer attr was edited into broken JSON ended in "capnb export:
    # JSONDecodeError: Expecting property name ...", naming neither the file nor the answer
    import xarray as xr

    path = tmp_path / "plan.nc"
    xr.Dataset(attrs={"answer": "{not json"}).to_netcdf(path, engine="h5netcdf")
    assert main(["export", "--plan", str(path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"capnb export: {path}: not a capnb plan: its answer is not JSON ("), err
    assert "JSONDecodeError" not in err and not (tmp_path / "out").exists()


def test_export_of_a_folder_names_the_plan_files_in_it(tmp_path, capsys):
    # capnb export --plan reports (the folder capnb plan wrote) said "reports: no such plan file",
    # of a folder that exists and holds plan.nc and plan.json
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "plan.json").write_text("{}")
    assert main(["export", "--plan", str(folder), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert f"capnb export: {folder}: a folder, not a plan file; give " in err, err
    assert str(folder / "plan.json") in err and "no such plan file" not in err
    assert not (tmp_path / "out").exists()


def test_the_tensor_parallel_flag_says_what_it_expects(capsys):
    # argparse named the parser's lambda: "argument --tensor-parallel: invalid <lambda> value"
    from capnb import cli

    assert cli._parser().parse_args(["plan", "--tensor-parallel", "1, 2"]).tensor_parallel == (1, 2)
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["plan", "--tensor-parallel", "1,x"])
    err = capsys.readouterr().err
    assert "argument --tensor-parallel: expected whole numbers separated by commas" in err
    assert "<lambda>" not in err


def test_export_does_not_replace_a_yaml_file_capnb_did_not_write(tmp_path, capsys):
    # 'capnb plan' refuses to replace your own hpa.yaml without --force; 'capnb export' wrote
    # over it with a plain write_text (no --force, not as a set)
    from capnb import plan
    from capnb.errors import OutputError
    from capnb.plan._manifests import PolicyChoice

    choice = PolicyChoice(policy="hpa", per_instance_qps=2.0, scale_up_threshold=0.7,
                          cooldown_s=300.0, min_instances=2, max_instances=6,
                          model="Llama-3.1-8B", gpu="H100-SXM", tensor_parallel=1)  # fmt: skip
    objects = plan.manifests(choice)
    own = tmp_path / "hpa.yaml"
    own.write_text("my: own\n")
    with pytest.raises(OutputError, match=r"hpa\.yaml: exists and capnb did not write it"):
        objects.write(tmp_path)
    assert own.read_text() == "my: own\n" and not (tmp_path / "keda.yaml").exists()
    written = objects.write(tmp_path, force=True)
    assert written["hpa"] == own and own.read_text() == objects.yaml("hpa")
    assert objects.write(tmp_path) == written  # its own files it replaces


@pytest.mark.parametrize("given", ["0", "-3", "two"])
def test_the_report_jobs_flag_takes_a_whole_number_of_kernels(capsys, given):
    # --jobs 0 and -3 ran one kernel without a word
    from capnb import cli

    assert cli._parser().parse_args(["report", "--jobs", "3"]).jobs == 3
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["report", "--jobs", given])
    assert "argument --jobs: expected a whole number, at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("jobs", [0, -1, 1.5, True])
def test_run_report_refuses_jobs_that_are_not_a_count_before_writing(tmp_path, jobs):
    from capnb.errors import InputError
    from capnb.report import run_report

    with pytest.raises(InputError, match="jobs"):
        run_report(out_dir=tmp_path / "out", jobs=jobs, progress=False)
    assert not (tmp_path / "out").exists()


def test_the_fleet_line_says_when_the_forecast_needs_more_than_the_reserve_at_all_times(
    small_plan,
):
    # "reserve 3 instances (always running)" read as the whole always-on fleet where every slot
    # of the forecast needed 504 or more
    import dataclasses
    import warnings

    from capnb import plan
    from capnb.plan._text import fleet_words

    with warnings.catch_warnings():  # the plan's warnings are its checks; not this test's
        warnings.simplefilter("ignore")
        answer = plan.answer(plan.build(small_plan))
    if answer.policy.name == "fixed":
        pytest.skip("a fixed fleet runs what it reserves")
    least = min(answer.fixed_instances)
    below = dataclasses.replace(answer, reserved_instances=max(least - 1, 0))
    assert f"forecast needs at least {least:,} instance" in fleet_words(below)
    level = dataclasses.replace(answer, reserved_instances=least)
    assert "needs at least" not in fleet_words(level)


def test_the_fleet_line_says_when_the_floor_leaves_the_autoscaler_nothing_to_add(small_plan):
    # a floor above the forecast's peak and its burst buffer (min-scale = max-scale in the
    # exported objects) was said as "... adds on-demand instances as load needs them"
    import dataclasses
    import warnings

    from capnb import plan
    from capnb.plan._text import fleet_words

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        answer = plan.answer(plan.build(small_plan))
    if answer.policy.name == "fixed":
        pytest.skip("a fixed fleet runs what it reserves")
    said = fleet_words(answer)
    # (the forecast's need is the fleet's, not what it adds: "above the reserve ...; load needs")
    assert "adds on-demand instances above the reserve as load needs them; load needs " in said
    top = max(answer.fixed_instances) + answer.burst_instances
    held = dataclasses.replace(answer, reserved_instances=top, peak_instances=top,
                               peak_serving_instances=top)  # fmt: skip
    text = fleet_words(held)
    assert "adds on-demand" not in text and "adds none, its floor covering" in text


def test_the_fleet_line_says_when_the_cold_start_vetoes_the_article_policys_scale_ups(small_plan):
    # a plan on an hourly rate series chose the article's policy with a 75 s cold start against a
    # 60 s budget: "article thresholds (...) adds on-demand instances as load needs them: 1
    # instance per hour of day ..., and up to 3 more instances in a burst", while its engine vetoes
    # every scale-up (at most 1 instance served in the replay; the burst test 93 min in breach)
    import dataclasses
    import warnings

    from capnb import plan
    from capnb.plan._text import fleet_words

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        answer = plan.answer(plan.build(small_plan))
    vetoed = dataclasses.replace(answer.policy, name="article", cold_start_s=75.0,
                                 cold_start_vetoes=True)  # fmt: skip
    top = max(answer.fixed_instances) + answer.burst_instances
    text = fleet_words(dataclasses.replace(answer, policy=vetoed, reserved_instances=top - 1))
    assert "adds on-demand" not in text
    assert "adds none (the 75 s cold start, over half the latency budget, vetoes its " in text
    hpa = dataclasses.replace(vetoed, name="hpa")  # the HPA starts instances whatever they cost
    assert "as load needs them" in fleet_words(
        dataclasses.replace(answer, policy=hpa, reserved_instances=top - 1)
    )


@pytest.mark.parametrize("command", ["plan", "report"])
def test_an_out_that_is_a_file_is_refused_before_the_plan_is_built(tmp_path, capsys, monkeypatch,
                                                                    command):  # fmt: skip
    # the whole plan was built (minutes on a large trace) before "a file, not a folder to write
    # into" ended the command
    import capnb.plan
    import capnb.report

    def built(*args, **kwargs):
        raise AssertionError("built a plan it could not write")

    monkeypatch.setattr(capnb.plan, "build", built)
    monkeypatch.setattr(capnb.report, "run_report", built)
    out = tmp_path / "taken"
    out.write_text("mine")
    assert main([command, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == f"capnb {command}: {out}: a file, not a folder to write into\n", err
    assert out.read_text() == "mine"
    # a folder under that file, or (for plan) a plan file capnb did not write there, failed only
    # after the plan was built
    assert main([command, "--out", str(out / "sub")]) == 1
    err = capsys.readouterr().err
    assert err == f"capnb {command}: {out}: a file, not a folder to write into\n", err
    if command == "plan":
        (tmp_path / "folder").mkdir()
        (tmp_path / "folder" / "hpa.yaml").write_text("mine")
        assert main([command, "--out", str(tmp_path / "folder")]) == 1
        assert "hpa.yaml: exists and capnb did not write it" in capsys.readouterr().err
        assert [p.name for p in (tmp_path / "folder").iterdir()] == ["hpa.yaml"]


def test_a_relative_calibrate_path_is_recorded_from_the_folder_it_was_given_in(
    tmp_path, capsys, monkeypatch
):
    # --calibrate runs/ was kept as 'runs/' in the plan's config (plan.json's config, the plan.nc
    # a report reads), where --benchmark, --model and --trace are recorded as absolute paths
    import capnb.plan

    seen = {}

    def built(config):
        seen["runs"] = config.serving.calibration_runs
        raise capnb.plan.PlanError("stop")

    monkeypatch.setattr(capnb.plan, "build", built)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert main(["plan", "--calibrate", "runs/", "--gpus", "H100-SXM", "--out", "out"]) == 1
    assert seen["runs"] == str(tmp_path / "runs")


def test_an_empty_calibrate_flag_is_refused_not_read_as_no_runs(tmp_path, capsys, monkeypatch):
    # --calibrate="$RUNS" with RUNS unset planned on the bundled calibration without a word
    # (calibration_runs = '' is the config's "none")
    import capnb.plan

    def built(*args, **kwargs):
        raise AssertionError("planned without the runs it was given")

    monkeypatch.setattr(capnb.plan, "build", built)
    assert main(["plan", "--calibrate=", "--gpus", "H100-SXM", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "--calibrate '': an empty path" in err, err


def test_a_benchmark_replaces_the_calibration_of_the_config_it_replans(
    tmp_path, capsys, monkeypatch
):
    # a plan built with --calibrate printed, for its close call, `capnb plan --config plan.json
    # --gpus H200 --tensor-parallel 1 --benchmark capnb-H200-tp1/ ...`, which failed: "plan.json:
    # calibration_runs = '/runs' calibrates the serving-engine model; latency = '.../capnb-H200-tp1'
    # does not use it": --benchmark replaces the latency model, and its calibration with it
    import capnb.plan

    seen = {}

    def built(config):
        seen["serving"] = config.serving
        raise capnb.plan.PlanError("stop")

    monkeypatch.setattr(capnb.plan, "build", built)
    monkeypatch.chdir(tmp_path)
    for folder in ("runs", "capnb-H200-tp1"):
        (tmp_path / folder).mkdir()
    (tmp_path / "plan.toml").write_text(
        '[serving]\ngpus = ["H100-SXM", "H200"]\ncalibration_runs = "runs"\n'
        'calibration_gpu = "H100-SXM"\n'
    )
    argv = ["plan", "--config", "plan.toml", "--gpus", "H200", "--tensor-parallel", "1"]
    assert main([*argv, "--benchmark", "capnb-H200-tp1/", "--out", "out"]) == 1
    assert "calibrat" not in capsys.readouterr().err
    serving = seen["serving"]
    assert serving.latency == str(tmp_path / "capnb-H200-tp1")
    assert (serving.calibration_runs, serving.calibration_gpu) == ("", "")
    # both on the command line: still one latency too many, said of the two flags given (it
    # was "plan.toml: calibration_runs = ... does not use it (set latency = 'engine')")
    assert main([*argv, "--benchmark", "capnb-H200-tp1/", "--calibrate", "runs/"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("capnb plan: --benchmark and --calibrate: "), err
    assert "plan.toml" not in err and "set latency" not in err, err


def test_flags_over_a_config_are_named_where_the_plan_names_its_config(tmp_path, monkeypatch):
    # capnb plan --config plan.toml --gpus H200 --engine sglang said "Inputs: config: plan.toml"
    # and stored config_source "plan.toml" in plan.json, whose settings plan.toml does not hold
    import capnb.plan

    seen = {}

    def built(config):
        seen["source"], seen["gpus"] = config.source, config.serving.gpus
        raise capnb.plan.PlanError("stop")

    monkeypatch.setattr(capnb.plan, "build", built)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plan.toml").write_text('[serving]\ngpus = ["H100-SXM"]\n')
    argv = ["plan", "--config", "plan.toml", "--gpus", "H200", "--engine", "sglang"]
    assert main([*argv, "--out", "out"]) == 1
    assert seen == {"source": "plan.toml, changed by --gpus, --engine", "gpus": ("H200",)}
    assert main(["plan", "--out", "out"]) == 1
    assert seen["source"] == "defaults"


@pytest.mark.parametrize(
    "flag", ["--start", "--time-column", "--prompt-column", "--output-column", "--rate-column",
             "--count-column"],
)  # fmt: skip
def test_an_empty_trace_flag_is_refused_not_read_as_not_given(flag, tmp_path, capsys, monkeypatch):
    # --rate-column="$COL" with COL unset planned on the bundled series' own column (exit 0), as
    # an empty --start, --time-column, ... planned as if the flag were not given
    import capnb.plan

    def built(*args, **kwargs):
        raise AssertionError(f"planned with {flag} '' as if it were not given")

    monkeypatch.setattr(capnb.plan, "build", built)
    assert main(["plan", f"{flag}=", "--out", str(tmp_path)]) == 1
    setting = flag[2:].replace("-", "_")
    err = capsys.readouterr().err
    assert f"command line: {setting} = '': String should have at least 1 character" in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["plan", "report", "export"])
def test_an_empty_out_is_refused_not_read_as_the_current_or_the_plans_folder(
    command, tmp_path, capsys, monkeypatch
):
    # --out= (an unset shell variable: --out "$OUT") wrote plan.nc, plan.json and the YAML files
    # into the current folder (plan, report), or beside the plan (export)
    import capnb.plan
    import capnb.report

    def built(*args, **kwargs):
        raise AssertionError("built a plan it could not write")

    monkeypatch.setattr(capnb.plan, "build", built)
    monkeypatch.setattr(capnb.report, "run_report", built)
    monkeypatch.chdir(tmp_path)
    assert main([command, "--out="]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"capnb {command}: output folder '': an empty path (an unset shell variable?); give "
        "the folder to write into, or leave --out out\n"
    ), err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["plan", "report"])
@pytest.mark.parametrize("field", ["latency", "calibration_runs"])
def test_an_out_that_is_the_folder_of_the_runs_read_is_refused(
    command, field, tmp_path, capsys, monkeypatch
):
    # capnb plan --benchmark runs/ --out runs/ wrote plan.json and .capnb-outputs.json among the
    # runs; the same command run again then failed: ".capnb-outputs.json: not a vllm bench serve
    # or SGLang bench_serving result"
    import capnb.plan

    def built(*args, **kwargs):
        raise AssertionError("built a plan whose files would be read as runs")

    monkeypatch.setattr(capnb.plan, "build", built)
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "run0.json").write_text("{}")
    config = tmp_path / "p.toml"
    extra = '\ngpus = ["H100-SXM"]\nlatency = "engine"' if field == "calibration_runs" else ""
    config.write_text(f'[serving]\n{field} = "runs"{extra}\n')
    assert main([command, "--config", str(config), "--out", "runs"]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"capnb {command}: runs: the folder of {field} = '{runs}', which the plan reads; the "
        "files capnb writes there would be read as runs the next time: give another --out\n"
    ), err
    assert [p.name for p in runs.iterdir()] == ["run0.json"]


def test_a_report_whose_config_is_the_plan_toml_it_writes_is_refused_as_such(
    tmp_path, capsys, monkeypatch
):
    # capnb config rep/plan.toml, then capnb report --config rep/plan.toml --out rep: "plan.toml:
    # exists and capnb did not write it ... pass --force", though capnb had written it; with
    # --force the report wrote its own plan.toml over the config it read (comments and all)
    import capnb.plan

    def built(*args, **kwargs):
        raise AssertionError("built a plan it would write over its config")

    monkeypatch.setattr(capnb.plan, "build", built)
    monkeypatch.chdir(tmp_path)
    assert main(["config", "rep/plan.toml"]) == 0
    text = (tmp_path / "rep" / "plan.toml").read_text()
    capsys.readouterr()
    for force in ([], ["--force"]):
        assert main(["report", "--config", "rep/plan.toml", "--out", "rep", *force]) == 1
        err = capsys.readouterr().err
        assert err == (
            "capnb report: rep/plan.toml: the config the report reads, where it would write the "
            "plan.toml of its plan: give another --out, or keep the config elsewhere\n"
        ), err
    assert [p.name for p in (tmp_path / "rep").iterdir()] == ["plan.toml"]
    assert (tmp_path / "rep" / "plan.toml").read_text() == text


def test_report_says_every_warning_on_stderr_and_keeps_stdout_for_the_answer(
    tmp_path, capsys, monkeypatch
):
    # capnb report recorded every warning and printed only those with "cannot apply", on stdout:
    # a trace repaired on reading ("windows were out of time order ...; sorted", which capnb
    # plan prints on stderr) and a worksheet left out as a defect were dropped without a word
    import warnings

    import capnb.plan
    import capnb.report
    from capnb.data import TraceWarning

    def run_report(config, out, **kwargs):
        for text, category in [
            ("rates.csv: windows were out of time order; sorted", TraceWarning),
            ("worksheet 03_capacity left out: it failed a check, a defect in capnb", UserWarning),
            ("worksheet 06_serving cannot apply to these inputs: InputError: x", UserWarning),
            ("unclosed event loop", ResourceWarning),  # hidden, as Python hides it
        ]:
            warnings.warn(text, category, stacklevel=2)
        (tmp_path / "plan.json").write_text("{}")
        return []

    monkeypatch.setattr(capnb.report, "run_report", run_report)
    monkeypatch.setattr(capnb.plan, "inputs_used", lambda summary: "the test's")
    assert main(["report", "--out", str(tmp_path), "--quiet"]) == 0
    printed = capsys.readouterr()
    assert "sorted" not in printed.out and "left out" not in printed.out, printed.out
    assert "cannot apply" not in printed.out, printed.out
    assert printed.err.splitlines() == [
        "capnb report: TraceWarning: rates.csv: windows were out of time order; sorted",
        "capnb report: worksheet 03_capacity left out: it failed a check, a defect in capnb",
        "capnb report: worksheet 06_serving cannot apply to these inputs: InputError: x",
    ], printed.err
    # the plan the pages read is listed beside them (it listed the HTML pages only: pass v)
    assert "The plan they read, beside them:" in printed.out
    assert f"  {(tmp_path / 'plan.json').resolve()}" in printed.out.splitlines()


def test_config_refuses_an_empty_path_as_empty(tmp_path, capsys, monkeypatch):
    # capnb config "$CFG" with CFG unset said ".: capnb writes plan configs as .toml", naming the
    # current folder the user never gave
    monkeypatch.chdir(tmp_path)
    assert main(["config", ""]) == 1
    err = capsys.readouterr().err
    assert err.startswith("capnb config: plan config '': an empty path (an unset shell"), err
    assert list(tmp_path.iterdir()) == []


def test_plan_takes_the_latency_model_as_a_flag(capsys):
    # `capnb plan --latency engine` said "unrecognized arguments": the latency model was a
    # config setting alone, though --benchmark (measured latencies) set the same setting
    from capnb import cli

    parser = cli._parser()
    for choice in ("auto", "model", "engine"):
        args = parser.parse_args(["plan", "--latency", choice])
        assert cli._overrides(args) == {"latency": choice}
        assert cli._flags_given(args) == ["--latency"]
    with pytest.raises(SystemExit):
        parser.parse_args(["plan", "--latency", "fast"])
    assert "--latency: invalid choice: 'fast'" in capsys.readouterr().err
    # measured latencies replace the model: both flags are one latency too many
    assert cli.main(["plan", "--latency", "engine", "--benchmark", "runs/"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("capnb plan: --benchmark and --latency: "), err


def test_a_one_row_rate_series_is_not_told_to_give_a_flag_that_cannot_help(tmp_path, capsys):
    # --interval is the forecast's window, not the series' step: it was told "give interval="
    trace = tmp_path / "r.csv"
    trace.write_text("timestamp,qps\n2025-01-01 00:00:00,5\n")
    out = tmp_path / "out"
    argv = ["plan", "--trace", str(trace), "--interval", "1h", "--out", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "r.csv, row 1 (line 2): a single window" in err, err
    assert "give interval=" not in err and "two rows or more" in err, err
    assert not out.exists()


def test_the_fleet_line_counts_the_reserved_gpus_in_words_not_an_instances_notation(small_plan):
    # "reserve 2 instances (2 x RTXPRO6000, always running)" on 1-GPU instances, a line after
    # "next: 2 x RTXPRO6000 at +14%" named the 2-GPU instance so: it read as 2 instances of 2 GPUs
    import dataclasses
    import warnings

    from capnb import plan
    from capnb.plan._text import fleet_words

    with warnings.catch_warnings():  # the plan's warnings are its checks; not this test's
        warnings.simplefilter("ignore")
        answer = plan.answer(plan.build(small_plan))
    one = dataclasses.replace(answer, tensor_parallel=1, reserved_instances=2)
    assert f"reserve 2 instances (2 {answer.gpu} GPUs, always running)" in fleet_words(one)
    two = dataclasses.replace(answer, tensor_parallel=2, reserved_instances=1)
    assert f"reserve 1 instance (2 {answer.gpu} GPUs, always running)" in fleet_words(two)
    assert f"x {answer.gpu}, always running" not in fleet_words(two)
    fixed = dataclasses.replace(answer.policy, name="fixed", min_instances=2, buffer_instances=0)
    held = dataclasses.replace(one, policy=fixed)
    assert f"reserve 2 instances (2 {answer.gpu} GPUs) and run them all month" in fleet_words(held)
