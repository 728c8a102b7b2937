"""``capnb`` on the command line (also ``python -m capnb``).

- ``capnb report [--config plan.toml] [--out DIR] [--show-code]``: execute the worksheets (the
  bundled defaults, or the config's inputs) and write one self-contained HTML report plus one per
  worksheet, code hidden unless ``--show-code``.
- ``capnb plan [--config plan.toml] [--model ...] [--gpus ...] [--sla S] [--trace ...]
  [--benchmark FILES] [--calibrate RUNS] [--out DIR]``: build the plan, print the recommendation
  and the inputs it used, write ``plan.nc`` and ``plan.json``.
- ``capnb export [--plan reports/plan.nc|plan.json] [--out DIR] [--name NAME] [--namespace NS]``: the plan's
  chosen autoscaling policy as ``hpa.yaml`` (Kubernetes HPA v2), ``knative.yaml`` (Knative KPA) and
  ``keda.yaml`` (KEDA ScaledObject), beside the plan unless ``--out`` says otherwise.
- ``capnb config plan.toml [--force]``: write the default plan config, every setting commented.
- ``capnb --version``.

Every error capnb raises is printed as its one message (it names the field, file or row) with exit
status 1 and no traceback; files written before stay intact.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
import time
import warnings
from pathlib import Path

__all__ = ["main"]


def _out_folder(out: str) -> None:
    """Refuse an ``--out`` that is a file (or under one) before the work, not after it."""
    from .data import check_set

    check_set(out, ())


#: Warnings Python's default filters hide: notices to developers, not to the command's user.
_UNSHOWN = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def _report(args: argparse.Namespace) -> int:
    from .report import WORKSHEETS, run_report

    _out_folder(args.out)
    names = tuple(args.worksheet or WORKSHEETS)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as raised:
        warnings.simplefilter("always")
        written = run_report(
            args.config,
            args.out,
            worksheets=names,
            jobs=args.jobs,
            progress=not args.quiet,
            show_code=args.show_code,
            force=args.force,
        )
    for warning in raised:  # one line each on stderr: a worksheet left out, a trace repaired
        if issubclass(warning.category, _UNSHOWN):
            continue  # Python shows these to developers only (an unclosed event loop, ...)
        kind = "" if warning.category is UserWarning else f"{warning.category.__name__}: "
        print(f"capnb report: {kind}{warning.message}", file=sys.stderr)
    elapsed = time.perf_counter() - start
    import json

    from .plan import inputs_used

    # the plan every worksheet ran on, exported beside the report
    summary = json.loads((Path(args.out) / "plan.json").read_text(encoding="utf-8"))
    print(f"Inputs: {inputs_used(summary)}")
    print(f"Report written in {elapsed:.0f} s (open it in any browser; it needs no network):")
    for path in written:
        print(f"  {path.resolve()}")
    # and the plan the pages read, written beside them (plan.nc, plan.json, plan.toml, the YAML)
    names = ("plan.nc", "plan.json", "plan.toml", "hpa.yaml", "knative.yaml", "keda.yaml")
    beside = [Path(args.out) / n for n in names if (Path(args.out) / n).is_file()]
    if beside:
        print("The plan they read, beside them:")
        for path in beside:
            print(f"  {path.resolve()}")
    return 0


#: The plan settings ``capnb plan`` takes as flags of their own name (``--time-column``).
_SAME_NAME = "model gpus tensor_parallel sla trace trace_kind start time_column prompt_column"
_SAME_NAME += " output_column rate_column count_column running_total time_unit timezone interval"

#: The plan settings ``capnb plan`` takes as flags: each flag's dest and the setting it gives.
_SETTING_FLAGS = {name: name for name in _SAME_NAME.split()} | {
    "latency": "latency",
    "benchmark": "latency",
    "engine": "engine",
    "calibrate": "calibration_runs",
    "calibrate_gpu": "calibration_gpu",
    "calibrate_tensor_parallel": "calibration_tensor_parallel",
}


def _yes_no(text: str) -> bool:
    """A yes/no flag's value as a bool."""
    answer = {"yes": True, "no": False}.get(text.strip().lower())
    if answer is None:
        raise argparse.ArgumentTypeError(f"expected yes or no, got {text!r}")
    return answer


def _flags_given(args: argparse.Namespace) -> list[str]:
    """The plan setting flags given (``--gpus``, ``--benchmark``, ...)."""
    return [f"--{d.replace('_', '-')}" for d in _SETTING_FLAGS if getattr(args, d) is not None]


def _overrides(args: argparse.Namespace) -> dict[str, object]:
    """The plan settings given as flags (None: not given)."""
    given: dict[str, object] = {}
    for dest, setting in _SETTING_FLAGS.items():  # (--latency and --benchmark: never both)
        if getattr(args, dest) is not None or setting not in given:
            given[setting] = getattr(args, dest)
    if args.benchmark is not None and args.calibrate is None:
        # measured latencies replace the latency model, and the config's own runs calibrating it
        # (a calibrated plan's close call re-plans with --config plan.json --benchmark DIR)
        cleared = {"calibration_runs": "", "calibration_gpu": "", "calibration_tensor_parallel": 1}
        given.update({k: v for k, v in cleared.items() if given[k] is None})
    return {k: v for k, v in given.items() if v is not None}


def _plan(args: argparse.Namespace) -> int:
    from . import plan
    from .data import check_set
    from .errors import CapnbError, InputError

    # a file in the way fails now, not after the plan is built (minutes on a large trace)
    check_set(args.out, plan.export_names(), force=args.force)
    overrides = _overrides(args)
    if args.calibrate is not None and not args.calibrate.strip():  # ('' is the config's "none")
        raise InputError(
            "--calibrate '': an empty path (an unset shell variable?); give the run files or "
            "leave the flag out to plan on the bundled calibration"
        )
    if args.benchmark is not None and args.latency is not None:
        raise InputError(
            f"--benchmark and --latency: measured latencies (--benchmark) replace the latency "
            f"model (--latency {args.latency}); give one"
        )
    if args.benchmark is not None and args.calibrate is not None:  # not the config's to blame
        raise InputError(
            "--benchmark and --calibrate: measured latencies (--benchmark) replace the "
            "serving-engine model that the runs of --calibrate calibrate; give one"
        )
    for name in ("model", "trace", "latency", "calibration_runs"):  # a path given is the shell's
        value = overrides.get(name)
        # an empty value is the config's to refuse, not Path("") (the current folder) to read
        if isinstance(value, str) and value.strip() and Path(value).exists():
            overrides[name] = str(Path(value).resolve())
    config = plan.read_config(args.config, overrides_from="command line", **overrides)
    flags = _flags_given(args)
    if flags:  # the inputs line and plan.json's config_source: not the file's settings alone
        config = dataclasses.replace(
            config, source=f"{config.source}, changed by {', '.join(flags)}"
        )
    check_set(args.out, (), reads=config.runs_read())  # not among the runs read
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", plan.PlanWarning)  # they are part of the printed text
            result = plan.build(config)
    except CapnbError as error:  # e.g. infeasible: an earlier run's files in --out are not this one
        print(f"capnb plan: {error}", file=sys.stderr)
        earlier = _earlier_files(Path(args.out))
        if earlier:
            print(f"capnb plan: {earlier}", file=sys.stderr)
        return 1
    # written before the answer is printed: a reader that stops early (| head) keeps the files
    files = plan.export(result, args.out, force=args.force)
    print(plan.describe(result))
    print(f"\nInputs: {plan.inputs_used(result)}")
    print("\nWritten:")
    for path in files.values():
        print(f"  {path.resolve()}")
    return 0


def _earlier_files(out: Path) -> str | None:
    """The files of an earlier run that a failed ``capnb plan`` left in ``out``, said as they are.

    A plan.json that is no plan was called "an earlier plan's ... (capnb export would export
    that plan)": only a plan.nc or plan.json that reads as a plan is one.
    """
    from . import plan
    from .errors import CapnbError

    earlier = [name for name in plan.export_names() if (out / name).is_file()]
    if not earlier:
        return None
    plans, others = [], []
    for name in earlier:
        if name.endswith((".nc", ".json")):
            try:
                _plan_json(out / name) if name.endswith(".json") else plan.load(out / name)
            except CapnbError:
                others.append(name)
                continue
            plans.append(name)
    one = len(earlier) == 1
    said = f"{', '.join(earlier)} in {out} {'is' if one else 'are'}"
    kept = "left as it was" if one else "left as they were"
    if not others:
        return f"{said} an earlier plan's, {kept} (capnb export would export that plan)"
    return (
        f"{said} {kept}, not written by this run: {', '.join(others)} "
        f"{'is' if len(others) == 1 else 'are'} not a plan capnb export reads"
        + (f" ({', '.join(plans)} would export an earlier plan)" if plans else "")
    )


def _export(args: argparse.Namespace) -> int:
    from . import plan
    from .data import check_set
    from .errors import InputError

    out_dir = Path(args.plan).parent if args.out is None else args.out
    check_set(out_dir, ())  # --out '' is refused, not read as the plan's folder
    path = Path(args.plan)
    # plan.json holds the answer record too
    built = _plan_json(path) if path.suffix == ".json" and path.is_file() else plan.load(path)
    try:
        choice = plan.policy_choice(built)
    except InputError as error:  # a field of an edited plan file
        raise InputError(f"{path}: {error}") from None
    out = plan.manifests(choice, name=args.name, namespace=args.namespace)
    written = out.write(out_dir, force=args.force)
    print(f"The {out.choice.policy} policy of {Path(args.plan).resolve()} as cluster objects:")
    for kind, path in written.items():
        same = "the chosen run" if out.exact[kind] else "a different run (see its notes)"
        print(f"  {path.resolve()}  (replays as {same})")
    return 0


def _plan_json(path: Path) -> dict:
    """A ``plan.json`` as ``capnb plan`` wrote it, or an InputError naming the file."""
    import contextlib
    import json

    from . import plan
    from .data import json_error_at, number_too_long, read_text, settle
    from .errors import InputError

    with contextlib.suppress(OSError):
        settle(path.parent)  # a set a killed writer committed: read it, as plan.load does
    text = read_text(path, "plan.json")
    try:
        built = json.loads(text)
    except RecursionError:
        raise InputError(
            f"{path}: not a plan.json (JSON nested too deeply); give the plan.json or plan.nc "
            "capnb plan wrote"
        ) from None
    except json.JSONDecodeError as error:
        raise InputError(
            f"{path}: not a plan.json (not JSON: {json_error_at(error)}); give the plan.json or "
            "plan.nc capnb plan wrote"
        ) from None
    except ValueError:  # an integer past Python's 4,300 digits
        raise number_too_long(str(path)) from None
    if not isinstance(built, dict) or not isinstance(built.get("answer"), dict):
        raise InputError(
            f"{path}: not a capnb plan (it carries no answer); give the plan.json or plan.nc "
            "capnb plan wrote"
        )
    try:
        plan.answer(built)  # its fields, each named where one is missing or foreign
    except InputError as error:
        raise InputError(
            f"{path}: {error}; give the plan.json or plan.nc capnb plan wrote"
        ) from None
    return built


def _config(args: argparse.Namespace) -> int:
    from . import plan

    path = plan.save_config(plan.PlanConfig(), args.path, force=args.force)
    given = shlex.quote(str(args.path))  # the commands run as printed, spaces and all
    print(
        f"Default plan config written to {Path(path).resolve()}; edit it and run "
        f"`capnb plan --config {given}` or `capnb report --config {given}`."
    )
    return 0


def _sla(text: str):
    """``--sla``: the bounds as an SLA record, or argparse's one-line error naming the flag."""
    from .errors import CapnbError
    from .records import SLA

    try:
        return SLA.parse(text)
    except CapnbError as error:
        raise argparse.ArgumentTypeError(
            str(error).removeprefix("--sla: ").removeprefix("sla: ")
        ) from None


def _kernels(text: str) -> int:
    """``--jobs``: a whole number, at least 1, or argparse's one-line error."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number, at least 1, got {text!r}")
    return value


def _degrees(text: str) -> tuple[int, ...]:
    """``--tensor-parallel``: whole numbers separated by commas, or argparse's one-line error."""
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected whole numbers separated by commas (e.g. 1,2,4), got {text!r}"
        ) from None


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="capnb", description="Capacity planning for LLM inference."
    )
    parser.add_argument("--version", action="version", version=f"capnb {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    said = "execute the worksheets and write offline HTML reports"
    report = commands.add_parser("report", help=said, description=said)
    report.add_argument(
        "--config",
        help="plan config (TOML/YAML, or a plan's plan.json); default: the bundled defaults",
    )
    report.add_argument("--out", default="reports", help="output directory (default: reports)")
    report.add_argument("--worksheet", action="append", help="run only this worksheet (repeatable)")
    report.add_argument(
        "--jobs", type=_kernels, default=2, help="worksheets run at once (default: 2)"
    )
    report.add_argument("--quiet", action="store_true", help="no progress bar")
    report.add_argument(
        "--force",
        action="store_true",
        help="replace files in --out that capnb did not write (a plan.toml, an edited report)",
    )
    report.add_argument(
        "--show-code",
        action="store_true",
        help="include the worksheets' code (hidden by default; their checks are never shown)",
    )
    report.set_defaults(run=_report)

    said = "build the plan, print the recommendation, export it"
    plan = commands.add_parser("plan", help=said, description=said)
    plan.add_argument(
        "--config",
        help="plan config (TOML/YAML, or a plan's plan.json); default: the bundled defaults; "
        "the flags below change its settings, and the Inputs line names them",
    )
    plan.add_argument(
        "--out",
        default="reports",
        help="where plan.nc, plan.json and the autoscaler YAML files go (default: reports)",
    )
    plan.add_argument(
        "--force", action="store_true", help="replace plan files in --out that capnb did not write"
    )
    plan.add_argument("--model", help="model: catalog id, config.json path or model folder")
    plan.add_argument(
        "--engine",
        help="serving engine: vllm-v1 (default), vllm-v0, sglang, trtllm, tgi (its latencies on "
        "the engine model, its serve commands and manifests)",
    )
    plan.add_argument(
        "--gpus", type=lambda t: tuple(t.split(",")), help="candidate GPUs, comma-separated"
    )
    plan.add_argument(
        "--tensor-parallel",
        type=_degrees,
        help="candidate tensor-parallel degrees, comma-separated",
    )
    plan.add_argument(
        "--sla",
        type=_sla,
        help="latency bounds met together, metric=seconds: ttft=1.5,tpot=60ms (metrics ttft, "
        "tpot, itl, e2e; quantile=0.99 by default; confirm accepts implausible bounds); it "
        "replaces the config's whole [sla] table, its quantile and other bounds included",
    )
    plan.add_argument("--trace", help="bundled trace name, or a request log or rate series file")
    plan.add_argument(
        "--trace-kind",
        choices=["auto", "requests", "rates"],
        help="what the trace file holds: auto (read from its columns, the default), requests "
        "(one row per request) or rates (requests/s or requests per window)",
    )
    plan.add_argument("--start", help="date and time the trace's clock starts (times from 0)")
    plan.add_argument("--time-column", help="the trace file's time column")
    plan.add_argument(
        "--time-unit", choices=["s", "ms", "us", "ns"], help="what numeric trace times count"
    )
    plan.add_argument("--timezone", help="the trace's clock, a zone name (e.g. Europe/Berlin)")
    plan.add_argument("--prompt-column", help="the request log's prompt-token column")
    plan.add_argument("--output-column", help="the request log's output-token column")
    plan.add_argument("--rate-column", help="the rate series' requests/s column")
    plan.add_argument("--count-column", help="the rate series' requests-per-window column")
    plan.add_argument("--running-total", type=_yes_no, metavar="{yes,no}",
                      help="yes: the count column is a running total (a Prometheus counter), "
                      "each window's requests its increase; no: its values as given (a service "
                      "ramping up); unset: a column rising at nearly every step is refused")  # fmt: skip
    plan.add_argument(
        "--interval",
        help="window of the forecast series (e.g. 15min, 1h): a whole multiple of a rate "
        "series' own step",
    )
    plan.add_argument(
        "--latency",
        choices=["auto", "model", "engine"],
        help="latency model: auto (each SLA bound on the model with the lower held-out error "
        "for its metric, the default), model (the calibrated analytic model) or engine (the "
        "serving-engine simulation); --benchmark gives measured latencies instead",
    )
    plan.add_argument(
        "--benchmark",
        help="measured latency files (vllm bench serve JSON, a GuideLLM report, AIPerf/GenAI-Perf "
        "CSV, a table): "
        "the plan uses them instead of the latency model (and instead of a config's "
        "calibration_runs; not with --calibrate)",
    )
    plan.add_argument(
        "--calibrate",
        help="your own benchmark runs of one GPU at two or three rates or concurrencies (vllm "
        "bench serve / bench_serving JSON, GuideLLM reports): they calibrate the serving-engine "
        "model that prices that GPU at every degree",
    )
    plan.add_argument(
        "--calibrate-gpu", help="the GPU the --calibrate runs measured (default: the only --gpus)"
    )
    plan.add_argument(
        "--calibrate-tensor-parallel",
        type=int,
        help="the tensor-parallel degree of the --calibrate runs (default 1)",
    )
    plan.set_defaults(run=_plan)

    said = "the plan's autoscaling policy as Kubernetes HPA, Knative and KEDA YAML"
    export = commands.add_parser("export", help=said, description=said)
    export.add_argument(
        "--plan",
        default="reports/plan.nc",
        help="plan.nc or plan.json written by capnb plan (default: reports/plan.nc)",
    )
    export.add_argument("--out", help="output directory (default: the plan's)")
    export.add_argument("--name", help="the Deployment / Knative Service (default: the model)")
    export.add_argument("--namespace", default="default",
                        help="Kubernetes namespace (default: default)")  # fmt: skip
    export.add_argument(
        "--force", action="store_true", help="replace YAML files in --out that capnb did not write"
    )
    export.set_defaults(run=_export)

    said = "write the default plan config, commented"
    config = commands.add_parser("config", help=said, description=said)
    config.add_argument("path", help="file to write, e.g. plan.toml")
    config.add_argument("--force", action="store_true", help="overwrite an existing file")
    config.set_defaults(run=_config)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``capnb`` command."""
    args = _parser().parse_args(argv)
    # a warning reads as one line of the command's output, not Python's source line
    formatting, warnings.formatwarning = warnings.formatwarning, _one_line
    try:
        return _run(args)
    finally:
        warnings.formatwarning = formatting


def _one_line(message, category, filename, lineno, line=None) -> str:
    return f"capnb: {category.__name__}: {message}\n"


def _run(args: argparse.Namespace) -> int:
    from .errors import CapnbError

    try:
        return args.run(args)
    except CapnbError as error:  # capnb's own errors name the field, file or row
        print(f"capnb {args.command}: {error}", file=sys.stderr)
        return 1
    except Exception as error:  # a CLI prints what failed, not a traceback
        print(f"capnb {args.command}: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: one line, and the shell's code for it
        print(f"capnb {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
