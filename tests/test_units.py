"""The glossary's unit strings are machine-readable: pint parses each one, with capnb's units."""

import pytest

from capnb import glossary

UNITS = sorted({t.units for t in (*glossary.DIMS.values(), *glossary.VARIABLES.values())})


def test_the_unit_strings_are_the_glossarys_quantities():
    assert sorted(glossary.unit_strings()) == [u for u in UNITS if u not in glossary.NOT_QUANTITIES]


@pytest.mark.parametrize("units", sorted(glossary.unit_strings()))
def test_every_glossary_unit_parses(units):
    ureg = glossary.unit_registry()
    quantity = ureg.Quantity(1.0, units)
    assert quantity.magnitude == 1.0


def test_only_the_time_coordinate_is_not_a_quantity():
    assert {t.name for t in glossary.DIMS.values() if t.units in glossary.NOT_QUANTITIES} == {
        "time"
    }


def test_capnb_units_keep_their_own_dimensions():
    ureg = glossary.unit_registry()
    assert ureg("GPU·h").dimensionality == (ureg("GPU") * ureg("hour")).dimensionality
    assert ureg("USD/Mtoken").to("USD/token").magnitude == pytest.approx(1e-6)
    for a, b in [("request", "token"), ("instance", "GPU"), ("request", "instance")]:
        assert ureg(a).dimensionality != ureg(b).dimensionality
    # the article's arithmetic, in units: instances x requests/s per instance
    assert (ureg("4 instance") * ureg("2.5 requests/s/instance")).to("requests/s").magnitude == 10


def test_a_quantity_per_unit_of_time_carries_that_time_in_its_units():
    # minutes_above ("expected minutes per month ...") was in 'min': pint read 30 of them as 0.5 h,
    # not 0.5 h a month, and the plan's record gives its breach minutes in 'min/month'
    import re

    per = {"second": "/s", "minute": "/min", "hour": "/hour", "day": "/day", "month": "/month"}
    wrong = []
    for term in glossary.VARIABLES.values():
        if term.long_name.startswith("whether"):  # a yes or no about such a quantity
            continue
        for span in re.findall(r"\bper (second|minute|hour|day|month)\b", term.long_name):
            if not term.units.endswith(per[span]):
                wrong.append(f"{term.name}: {term.units!r} for {term.long_name!r}")
    assert wrong == []


def test_every_units_attr_of_the_steps_results_parses():
    # the glossary page says unit_registry reads capnb's units, but memory's (and so every
    # capacity result's and plan's) windowed_layers said "layers", and the engine's curve "steps"
    # and "sequences": pint knows none of them. Counts are "1"; sequences in a step are requests
    from capnb import latency, memory
    from capnb.records import Deployment

    ureg = glossary.unit_registry()
    one = Deployment("Qwen3-8B", "L40S")
    work = latency.workload(prompt_tokens=[700, 1200], output_tokens=[100, 300])
    results = {
        "memory.max_concurrency": memory.max_concurrency(deployment=one, seq_len=4096),
        "latency.engine": latency.engine(one, work, concurrency=[1, 4], requests=40),
    }
    unread = []
    for where, ds in results.items():
        for name, var in ds.variables.items():
            units = var.attrs.get("units")
            if units is None or units in glossary.NOT_QUANTITIES:
                continue
            try:
                ureg(units)
            except Exception:  # pint's UndefinedUnitError, or its parser's own
                unread.append(f"{where}: {name} in {units!r}")
    assert unread == []
    assert results["latency.engine"].mean_batch.attrs["units"] == "requests"
