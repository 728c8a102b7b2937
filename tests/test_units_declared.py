"""Units declared at the boundaries: quantities in other units converted, other kinds refused."""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest
import xarray as xr

from capnb import elasticity
from capnb.errors import InputError
from capnb.glossary import unit_registry
from capnb.units import declare_units, declared

#: Argument names that carry a unit by capnb's naming rule, and the unit each must declare.
SUFFIXES = {"_s": "s", "_qps": "requests/s", "_bytes": "bytes", "usd_per_gpu_hour": "USD/hour"}
#: Public step packages whose functions are held to the rule.
PACKAGES = ("capnb.elasticity", "capnb.forecast", "capnb.memory", "capnb.plan")
#: Functions that take such an argument without declaring it, and why.
EXCEPTIONS = {
    # a plan's config is one validated record (PlanConfig): its fields are checked there
    "capnb.plan.backtest", "capnb.plan.build", "capnb.plan.read_config",
    # the policy of a plan as written for a cluster: seconds by Kubernetes' own fields
    "capnb.plan.PolicyChoice",
}  # fmt: skip


def _unit_of(name: str) -> str | None:
    for suffix, unit in SUFFIXES.items():
        if name.endswith(suffix) or name == suffix:
            return unit
    return None


def _public_functions():
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isfunction(value):
                yield f"{package}.{name}", value


def test_every_public_function_declares_the_units_its_argument_names_carry():
    missing = []
    for qualified, function in _public_functions():
        if qualified in EXCEPTIONS:
            continue
        wanted = {p: _unit_of(p) for p in inspect.signature(function).parameters if _unit_of(p)}
        if wanted and declared(function) != {**declared(function), **wanted}:
            missing.append(f"{qualified}: {wanted} declared as {declared(function)}")
    assert missing == []


def test_a_quantity_in_another_unit_is_converted_and_another_kind_refused():
    ureg = unit_registry()
    rate = np.full(600, 30.0)
    plain = elasticity.simulate(rate, step_s=1, per_instance_qps=10, policy="hpa",
                                cold_start_s=90, cooldown_s=300)  # fmt: skip
    given = elasticity.simulate(rate, step_s="1000 ms", per_instance_qps="600 requests/min",
                                policy="hpa", cold_start_s=ureg.Quantity(1.5, "min"),
                                cooldown_s="5 min")  # fmt: skip
    assert float(given.gpu_hours) == float(plain.gpu_hours)
    assert given.attrs["per_instance_qps"] == 10.0
    with pytest.raises(InputError, match=r"^cold_start_s: '5 GB' is gigabyte, not a time in s"):
        elasticity.simulate(rate, step_s=1, per_instance_qps=10, cold_start_s="5 GB")
    # a swept grid: each value in its unit
    grid = elasticity.sweep(rate, step_s=1, per_instance_qps=10, policy="hpa",
                            cooldown_s=["1 min", 300.0], cold_start_s=90)  # fmt: skip
    assert list(grid.cooldown_s.values) == [60.0, 300.0]


def test_a_dataarray_is_read_in_its_units_attr():
    @declare_units(level_qps="requests/s")
    def level(level_qps):
        return level_qps

    per_minute = xr.DataArray([60.0, 120.0], dims="t", attrs={"units": "requests/min"})
    got = level(per_minute)
    assert got.values.tolist() == [1.0, 2.0] and got.attrs["units"] == "requests/s"
    with pytest.raises(InputError, match="level_qps: .* not a rate"):
        level(xr.DataArray([1.0], dims="t", attrs={"units": "s"}))
    assert level("estimate") == "estimate"  # not a quantity: the function reads it itself


def test_a_number_with_a_unit_capnb_does_not_know_is_refused_by_the_argument_and_its_unit():
    # '600 req/min' was handed on as text: simulate then said "per_instance_qps must be a finite
    # number, got '600 req/min'", as if a number had been expected, with no word of the unit
    rate = np.full(600, 30.0)
    with pytest.raises(
        InputError,
        match=r"^per_instance_qps: '600 req/min' has a unit capnb does not read \('req'\); "
        r"give a rate in requests/s, as a number or with a unit \('10 requests/s'\)",
    ):
        elasticity.simulate(rate, step_s=1, per_instance_qps="600 req/min", cold_start_s=90)
    with pytest.raises(InputError, match=r"^usd_per_gpu_hour: '2 EUR/hour' has a unit .*'EUR'"):
        elasticity.simulate(rate, step_s=1, per_instance_qps=10, usd_per_gpu_hour="2 EUR/hour")
    from capnb import memory

    with pytest.raises(InputError, match=r"^seq_len: '8 Ktoken' has a unit .*tokens"):
        memory.max_concurrency(model="Llama-3.1-8B", gpu="H100-SXM", seq_len="8 Ktoken")


def test_a_table_of_quantities_is_converted_cell_by_cell():
    # choose_held_out's breach_s is windows x configurations: [["0 min", "5 s"], [0, 2]] raised
    # "ValueError: could not convert string to float: '0 min'" (no argument named), as only a
    # flat list was converted; each cell is now, and a cell of another kind names the argument
    breach, budget, cost = [[0, 5], [0, 2]], [40, 40], [[9, 5], [9, 5]]
    plain = elasticity.choose_held_out(breach, budget, cost)
    assert elasticity.choose_held_out([["0 min", "5 s"], [0, "2000 ms"]], budget, cost) == plain
    with pytest.raises(InputError, match=r"^breach_s: '5 GB' is gigabyte, not a time in s"):
        elasticity.choose_held_out([[0, "5 GB"], [0, 2]], budget, cost)


def test_a_declaration_names_real_parameters_and_units():
    with pytest.raises(TypeError, match="has no parameter"):
        declare_units(nope_s="s")(lambda x: x)
    with pytest.raises(ValueError, match="is not a unit"):
        declare_units(x="furlongs per fortnight please")


def test_plain_numbers_never_load_pint():
    # pint (its import and registry: about 0.3 s) is loaded for a quantity or a string only; every
    # worksheet kernel and command that passes plain numbers starts without it
    import subprocess
    import sys

    code = (
        "import sys, capnb.elasticity, capnb.forecast, capnb.plan\n"
        "from capnb.units import declare_units\n"
        "f = declare_units(cold_start_s='s')(lambda cold_start_s: cold_start_s)\n"
        "assert f(90.0) == 90.0 and f([1.0, 2.0]) == [1.0, 2.0]\n"
        "print('pint' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
