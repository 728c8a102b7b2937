"""The plan config as one record per table of a config file (issue 32).

A file's ``[serving] model = ...`` is ``cfg.serving.model``; ``replace`` takes what a file's top
level holds (a table, or a setting by its own name); files keep their format, and a saved config
loads back to the same record.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from capnb import plan
from capnb.errors import ConfigError
from capnb.plan._config import SECTIONS, TABLES
from capnb.records import SLA

DOCS = Path(__file__).resolve().parents[1] / "docs" / "plan.md"


def test_each_table_of_a_file_is_a_record_of_the_config():
    cfg = plan.PlanConfig()
    assert [f.name for f in dataclasses.fields(plan.PlanConfig)] == [*SECTIONS, "source"]
    for table, record in TABLES.items():
        assert isinstance(getattr(cfg, table), record)
        assert SECTIONS[table] == tuple(f.name for f in dataclasses.fields(record))
    assert isinstance(cfg.sla, SLA)
    assert (cfg.traffic.trace, cfg.serving.model, cfg.fleet.provider) == (
        "servegen-m-large",
        "Llama-3.1-8B",
        "hyperstack",
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.serving.model = "Qwen3-8B"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.serving = plan.Serving()  # type: ignore[misc]


def test_a_record_is_validated_on_construction():
    assert plan.Serving(gpus=("H200",)).gpus == ("H200",)
    for bad in (dict(gpus=()), dict(tensor_parallel=(0,)), dict(accounting="vllm2")):
        with pytest.raises(ValueError):
            plan.Serving(**bad)
    with pytest.raises(ValueError, match="policy grid has 3,600 cells"):
        plan.Elasticity(scale_up_threshold=tuple(i / 100 for i in range(1, 31)),
                        cooldown_s=tuple(float(i) for i in range(10)))  # fmt: skip


def test_replace_takes_a_table_or_a_setting_by_its_own_name():
    cfg = plan.PlanConfig()
    changed = cfg.replace(serving={"gpus": ["H200"], "tensor_parallel": 1})
    assert changed.serving.gpus == ("H200",) and changed.serving.tensor_parallel == (1,)
    assert changed.serving.model == cfg.serving.model  # the table's other keys are kept
    assert changed.traffic == cfg.traffic and changed.fleet == cfg.fleet
    assert changed == cfg.replace(gpus=("H200",), tensor_parallel=(1,))
    whole = cfg.replace(fleet=plan.Fleet(provider="none"))
    assert whole.fleet == plan.Fleet(provider="none")
    # the SLA is given whole: its bounds are met together
    assert cfg.replace(sla={"ttft_s": 1.0}).sla.bounds == {"ttft": 1.0}
    assert cfg.replace(sla="tpot=60ms").sla.bounds == {"tpot": 0.06}
    assert cfg.replace() == cfg


R = r"^defaults: replace\(\): "  # the config's source, then the call


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"gpu": "H200"}, R + r"unknown setting 'gpu'; known: "),
        ({"serving": {"gpu": "H200"}}, R + r"\[serving\] has no setting 'gpu'; known: model"),
        ({"gpus": ["H200"], "serving": {"gpus": ["L4"]}},
         R + r"\[serving\] gpus is given twice \(also as gpus\); keep one"),
        ({"serving": {"gpus": ["H1000"]}}, R + r"gpus\[0\] = 'H1000': unknown GPU"),
        ({"elasticity": {"step_s": 0.0}}, R + r"step_s = 0\.0: Input should be greater"),
        ({"traffic": {"trials": 0}, "fleet": {"spot_preemption": 2.0}},
         R + r"trials = 0: .*; defaults: replace\(\): spot_preemption = 2\.0: expected a share"),
        ({"sla": {"ttft": 1.0}}, R + r"\[sla\] has no setting 'ttft'"),
        ({"serving": {"latency": "analytic"}},
         R + r"latency = 'analytic': neither 'auto', 'model', 'engine', a bundled curve \(.*\) "
         r"nor an existing file or folder"),
    ],
)  # fmt: skip
def test_a_bad_change_names_its_setting(changes, message):
    with pytest.raises(ConfigError, match=message):
        plan.PlanConfig().replace(**changes)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[traffic]\ntrace = "servegen-m-small"\ntrials = 0\n', r"p\.toml:3: trials = 0: "),
        ("[serving]\ngpus = [\"H200\"]\nprefix_cache_share = 1.5\n",
         r"p\.toml:3: prefix_cache_share = 1\.5: Input should be less than 1"),
        ("[elasticity]\npolicies = [\"hpa\", \"nope\"]\n", r"p\.toml:2: policies\[1\] = 'nope': "),
        ("[fleet]\nreserved = \"always\"\n", r"p\.toml:2: reserved = 'always': expected one of"),
        ("[sla]\nttft_s = -1.0\n", r"p\.toml:2: \[sla\] ttft_s = -1"),
        ("[serving]\nlatency = \"analytic\"\n", r"p\.toml:2: latency = 'analytic': neither 'auto'"),
        ("[fleet]\ngpus = [\"H200\"]\n", r"p\.toml:2: \[fleet\] has no setting 'gpus'; known: "),
        ("gpus = [\"H200\"]\n[serving]\ngpus = [\"L4\"]\n",
         r"p\.toml:3: \[serving\] gpus is given twice \(also as gpus on line 1\); keep one"),
        # a table given as a value was "unknown setting 'traffic'", a table the file may hold
        ("traffic = [1, 2]\n", r"p\.toml:1: traffic is a table of settings \(a \[traffic\] "
                                r"table, or traffic\.<setting> = \.\.\.\), not list \[1, 2\]"),
        ('fleet = "none"\n', r"p\.toml:1: fleet is a table of settings .*, not str 'none'"),
    ],
)  # fmt: skip
def test_a_files_bad_setting_is_named_with_its_table_and_line(tmp_path, text, message):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        plan.load_config(path)


def test_a_saved_config_loads_back_and_files_keep_their_format(tmp_path):
    cfg = plan.PlanConfig().replace(
        traffic={"trace": "servegen-m-small", "trials": 300, "timezone": "Europe/Berlin"},
        serving={"gpus": ("H100-SXM", "H200"), "tensor_parallel": (1, 2), "accounting": "vllm"},
        sla={"ttft_s": 1.5, "tpot_s": 0.06, "quantile": 0.95},
        elasticity={"policies": ("hpa", "fixed"), "cold_start_s": 90.0, "backtest_days": 0},
        fleet={"reserved": "reserved_1y", "spot_preemption": 0.1},
    )
    path = plan.save_config(cfg, tmp_path / "plan.toml")
    text = path.read_text()
    for table in SECTIONS:
        assert f"\n[{table}]\n" in text
    loaded = plan.load_config(path)
    assert loaded == cfg and loaded.tables() == cfg.tables()
    # the same settings at a file's top level (a flat file, as earlier releases wrote) load alike
    flat = tmp_path / "flat.yaml"
    flat.write_text(
        "trace: servegen-m-small\ntrials: 300\ntimezone: Europe/Berlin\n"
        "gpus: [H100-SXM, H200]\ntensor_parallel: [1, 2]\naccounting: vllm\n"
        "sla: {ttft_s: 1.5, tpot_s: 0.06, quantile: 0.95}\n"
        "policies: [hpa, fixed]\ncold_start_s: 90.0\nbacktest_days: 0\n"
        "fleet: {reserved: reserved_1y, spot_preemption: 0.1}\n"
    )
    assert plan.load_config(flat) == cfg


def test_the_flat_form_is_the_one_a_plan_stores():
    cfg = plan.PlanConfig()
    flat = cfg.as_dict()
    assert list(flat) == [name for names in SECTIONS.values() for name in names]
    assert flat["gpus"] == list(cfg.serving.gpus) and flat["sla"] == cfg.sla.as_dict()
    assert plan.read_config(flat) == cfg == plan.read_config(cfg.tables())


def test_the_plan_page_lists_every_setting_of_every_table():
    page = DOCS.read_text()
    for table, names in SECTIONS.items():
        row = re.search(rf"^\| `\[{table}\]` \|.*$", page, flags=re.M)
        assert row, table
        listed = re.findall(r"`(\w+)`", row.group(0).split("|")[3])
        expected = [f.name for f in dataclasses.fields(SLA)] if table == "sla" else list(names)
        assert listed == expected, table


def test_a_step_that_does_not_divide_a_policys_period_is_refused_where_the_file_says_it(tmp_path):
    # step_s = 2 passed the config's checks and the plan ran its forecast and capacity steps
    # before the simulator refused HPA's 15-s sync period, naming none of the file's settings
    path = tmp_path / "p.toml"
    path.write_text('[elasticity]\npolicies = ["hpa", "knative"]\nstep_s = 2\n')
    with pytest.raises(ConfigError, match=r"p\.toml:3: step_s = 2: .*hpa's sync_s = 15 s.*1 s"):
        plan.load_config(path)
    with pytest.raises(ConfigError, match=r"step_s = 5: .*knative's tick_s = 2 s"):
        plan.PlanConfig().replace(elasticity={"policies": ("knative",), "step_s": 5})
    with pytest.raises(
        ConfigError, match=r"tolerance_s = 60\.0: .*step_s = 9 s: tolerance_s = 60 s is not"
    ):
        plan.PlanConfig().replace(
            elasticity={"policies": ("fixed",), "cooldown_s": (900,), "step_s": 9}
        )
    fine = plan.PlanConfig().replace(elasticity={"policies": ("knative",), "step_s": 2})
    assert fine.elasticity.step_s == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [('interval = "-10min"\n', r"p\.toml:2: interval = '-10min': is not a duration; write e\.g\."),
     ('interval = "10 parsecs"\n', r"p\.toml:2: interval = '10 parsecs': is not a duration"),
     ('interval = "7min"\n', r"p\.toml:2: interval = '7min': does not divide an hour"),
     ('timezone = "Mars/Olympus"\n', r"p\.toml:2: timezone = 'Mars/Olympus': is not a known IANA")],
)  # fmt: skip
def test_an_interval_or_timezone_is_checked_where_the_file_gives_it(tmp_path, text, message):
    # they passed the config and failed in the forecast step, without the file's line
    path = tmp_path / "p.toml"
    path.write_text("[traffic]\n" + text)
    with pytest.raises(ConfigError, match=message):
        plan.load_config(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [('tolerance_s = "1 min"\n', r"p\.toml:2: tolerance_s = '1 min': expected a number of s, not "
      r"text: write 60 for '1 min'"),
     ('cooldown_s = ["5 min", 900]\n', r"p\.toml:2: cooldown_s\[0\] = '5 min': expected a number "
      r"of s, not text: write 300 for '5 min'"),
     ('step_s = "5 GiB"\n', r"p\.toml:2: step_s = '5 GiB': '5 GiB' is gibibyte, not a time in s"),
     ('step_s = "fast"\n', r"p\.toml:2: step_s = 'fast': expected a number of s$")],
)  # fmt: skip
def test_a_setting_in_seconds_given_with_a_unit_says_the_number_to_write(tmp_path, text, message):
    # the Python API reads tolerance_s='1 min' as 60 s; the config refused it with pydantic's
    # "Input should be a valid number", which names neither the unit nor the number meant
    path = tmp_path / "p.toml"
    path.write_text("[elasticity]\n" + text)
    with pytest.raises(ConfigError, match=message):
        plan.load_config(path)


def test_a_cold_start_given_with_a_unit_says_the_number_to_write(tmp_path):
    # tolerance_s = "1 min" says "write 60"; cold_start_s = "1 min" (seconds or 'estimate') said
    # only "expected a finite number of seconds >= 0, or 'estimate'", no word of the 60 s meant
    path = tmp_path / "p.toml"
    path.write_text('[elasticity]\ncold_start_s = "1 min"\n')
    with pytest.raises(ConfigError, match=r"cold_start_s = '1 min': expected a number of s, not "
                       r"text: write 60 for '1 min' \(or 'estimate'\)"):  # fmt: skip
        plan.load_config(path)
    path.write_text('[elasticity]\ncold_start_s = "estimat"\n')
    with pytest.raises(ConfigError, match=r"= 'estimat': expected a finite number of seconds from "
                       r"0 to 86,400 \(a day\), or 'estimate'$"):  # fmt: skip
        plan.load_config(path)


def test_backtest_days_is_described_as_what_it_sets():
    # backtest_days is the length of each held-out window after the last (up to 7) daily origins,
    # and a trace under 8 days is held out in 6-hour windows whatever it says: a plan with
    # backtest_days = 3 on a 14-day series reported 7 windows of up to 3 days, where the setting
    # read "last days of the trace held out" (3 days, so at most 3 windows)
    from capnb.plan._config import Elasticity
    from capnb.plan._origins import HOURLY_BELOW_DAYS, MOST_HELD_OUT

    field = Elasticity.__pydantic_fields__["backtest_days"]
    assert "last days of the trace" not in field.description
    assert f"up to {MOST_HELD_OUT}" in field.description
    assert f"under {HOURLY_BELOW_DAYS} days" in field.description
    assert "last days of the trace" not in Elasticity.__doc__


def test_a_cold_start_given_in_part_steps_is_refused_not_rounded_up():
    # step_s = 15, tolerance_s = 45 and cold_start_s = 20: the plan rounded the cold start up to
    # 30 s without a word, said "Cold start (30 s) is longer than half the 45 s latency budget
    # (22.5 s)", vetoed the article policy's scale-ups the 20 s given would not veto, and wrote
    # 30 s into the exported manifests
    settings = {"policies": ("fixed",), "cooldown_s": (900,), "step_s": 15, "tolerance_s": 45}
    with pytest.raises(
        ConfigError, match=r"cold_start_s = 20: .*step_s = 15 s: cold_start_s = 20 s is not"
    ):
        plan.PlanConfig().replace(elasticity={**settings, "cold_start_s": 20})
    fine = plan.PlanConfig().replace(elasticity={**settings, "cold_start_s": 30})
    assert fine.elasticity.cold_start_s == 30
    assert plan.PlanConfig().replace(elasticity=settings).elasticity.cold_start_s == "estimate"


def test_tolerance_s_is_described_as_what_it_sets():
    # tolerance_s read "how long the service may run over capacity", but a step is in breach as
    # soon as requests are left over (capnb.kernels.autoscale_loop.serve): a plan on a 14-day
    # series breached 9,332 s at tolerance_s = 60 and the same 9,332 s at 300; what it sets is
    # when a waiting request is dropped, and the cold start above half of it that vetoes scale-ups
    import capnb.elasticity
    from capnb.plan._config import Elasticity

    field = Elasticity.__pydantic_fields__["tolerance_s"]
    assert "run over capacity" not in field.description
    assert "dropped" in field.description and "half" in field.description
    assert "before the SLA counts as breached" not in capnb.elasticity.__doc__


def test_the_written_config_names_each_settings_choices(tmp_path):
    # capnb config wrote "# burst model: the article's (...), fitted to the trace, or none" above
    # bursts = "article": 'fitted' is refused (the choice is 'fit'), and slots, accounting and
    # disaggregation named none of theirs, so an operator learned them from an error
    text = plan.save_config(plan.PlanConfig(), tmp_path / "plan.toml").read_text()
    assert "one of 'article', 'fit', 'none'" in text
    assert "one of 'hour_of_day', 'hour_of_week'" in text
    assert "one of 'article', 'vllm'" in text
    assert "each one of 'article', 'hpa', 'knative', 'fixed', 'fixed_elastic', 'predictive'" in text


def test_a_calibration_gpu_or_degree_without_calibration_runs_is_refused():
    # --calibrate-gpu H200 (or calibration_tensor_parallel = 4) without the runs was planned on
    # the bundled calibration without a word: a setting the user gave that nothing read
    with pytest.raises(ConfigError, match="calibration_gpu = 'H200' .*calibration_runs"):
        plan.read_config({"calibration_gpu": "H200", "latency": "engine"})
    with pytest.raises(ConfigError, match="calibration_tensor_parallel = 4 .*calibration_runs"):
        plan.read_config({"calibration_tensor_parallel": 4, "latency": "engine"})
    plan.read_config({"calibration_runs": "runs/", "calibration_tensor_parallel": 4,
                      "calibration_gpu": "H200", "latency": "engine"})  # fmt: skip


def test_a_latency_name_is_no_path_whatever_sits_beside_the_config(tmp_path):
    # latency = "auto" (the default's own name) beside a folder called auto was read as that
    # folder of measured runs: the names a setting takes are never paths
    (tmp_path / "auto").mkdir()
    (tmp_path / "engine").mkdir()
    for name in ("auto", "engine"):
        path = tmp_path / f"{name}.toml"
        path.write_text(f'[serving]\nlatency = "{name}"\n')
        assert plan.read_config(path).serving.latency == name


def test_save_config_keeps_a_users_file_without_force(tmp_path):
    """As ``capnb config`` and every other writer: an existing file is replaced only with force."""
    mine = tmp_path / "plan.toml"
    mine.write_text("[sla]\ntpot_s = 0.04  # my edit\n")
    with pytest.raises(ConfigError, match=r"plan\.toml: exists; .*force=True"):
        plan.save_config(plan.PlanConfig(), mine)
    assert mine.read_text() == "[sla]\ntpot_s = 0.04  # my edit\n"
    assert [p.name for p in tmp_path.iterdir()] == ["plan.toml"]  # no temporary left
    plan.save_config(plan.PlanConfig(), mine, force=True)
    assert plan.load_config(mine) == plan.load_config(mine)
    assert "my edit" not in mine.read_text()


def test_save_config_names_a_folder_in_the_way_not_force(tmp_path):
    """A folder named plan.toml: --force cannot replace it, so the error does not offer it."""
    (tmp_path / "plan.toml").mkdir()
    for force in (False, True):
        with pytest.raises(ConfigError, match=r"plan\.toml: a folder, not a file") as raised:
            plan.save_config(plan.PlanConfig(), tmp_path / "plan.toml", force=force)
        assert "force" not in str(raised.value)
    assert [p.name for p in tmp_path.iterdir()] == ["plan.toml"]


def test_save_config_keeps_a_link_to_no_file_without_force(tmp_path):
    link = tmp_path / "plan.toml"
    link.symlink_to(tmp_path / "shared" / "plan.toml")  # a share not mounted
    # it said 'plan.toml: exists', untrue of a link to no file, and not where it points, as
    # write_set says it ('a symbolic link to .../shared/plan.toml, which does not exist')
    with pytest.raises(ConfigError) as raised:
        plan.save_config(plan.PlanConfig(), link)
    said = str(raised.value)
    assert (
        f"plan.toml: a symbolic link to {tmp_path / 'shared' / 'plan.toml'}, which does not exist"
        in said
        and "force=True" in said
        and "exists;" not in said
    ), said
    assert link.is_symlink()


def write_set_interrupted(folder, files: dict) -> None:
    """``capnb.data.write_set`` stopped (Ctrl-C, kill) after its commit, before the files move."""
    from capnb.data import _files, write_set

    moved = _files._roll_forward

    def stopped(at):  # the second call, in the commit: interrupted before the files move
        if (at / _files._COMMIT).is_dir():
            raise KeyboardInterrupt
        moved(at)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_files, "_roll_forward", stopped)
        with pytest.raises(KeyboardInterrupt):
            write_set(folder, files)


def test_a_plan_json_config_is_read_from_the_set_a_killed_writer_committed(tmp_path):
    # a plan run stopped after its set was committed but before its files were moved into
    # place: capnb export --plan plan.json and plan.load read the committed plan, while
    # load_config (capnb plan --config plan.json, the settle commands' re-plan) read the
    # earlier run's config
    import json

    from capnb.data import _files, write_set

    def plan_json(scale: float) -> str:
        values = {**plan.PlanConfig().as_dict(), "demand_scale": scale}
        return json.dumps({"config": values, "answer": {}})

    write_set(tmp_path, {"plan.json": plan_json(1.0)})
    write_set_interrupted(tmp_path, {"plan.json": plan_json(2.0)})
    assert plan.load_config(tmp_path / "plan.json").traffic.demand_scale == 2.0
    assert not (tmp_path / _files._COMMIT).exists()
