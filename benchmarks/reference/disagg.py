"""Plain Python reference of :mod:`capnb.kernels.disagg`: the same balance found by scanning.

Written for clarity, not speed: the throughput ``X`` is scanned in many small steps from 0 up to
the slower pool's ceiling, each step's requests held counted with :func:`numpy.interp`, and the
first step that holds ``concurrency`` refined linearly.
"""

from __future__ import annotations

__all__ = ["REGISTRY", "balance_python"]


def _k_at(k, x, rate):
    """Concurrency at which the curve through (0, 0) and (k, x) first delivers ``rate``."""
    ks = [0.0, *[float(v) for v in k]]
    xs = [0.0, *[float(v) for v in x]]
    if rate > xs[-1]:
        return float("inf")
    for i in range(1, len(xs)):
        if xs[i] >= rate:
            if xs[i] == xs[i - 1]:
                return ks[i - 1]
            return ks[i - 1] + (rate - xs[i - 1]) * (ks[i] - ks[i - 1]) / (xs[i] - xs[i - 1])
    return ks[-1]


def balance_python(concurrency, prefill, decode, transfer_s, k_p, x_p, k_d, x_d, steps=200_000):
    """(X, k_p, k_d, saturated) as :func:`capnb.kernels.disagg.balance` computes them."""

    def held(rate):
        return (
            prefill * _k_at(k_p, x_p, rate / prefill)
            + rate * transfer_s
            + decode * _k_at(k_d, x_d, rate / decode)
        )

    top_p, top_d = prefill * float(x_p[-1]), decode * float(x_d[-1])
    top = min(top_p, top_d)
    kp = _k_at(k_p, x_p, min(top / prefill, float(x_p[-1])))
    kd = _k_at(k_d, x_d, min(top / decode, float(x_d[-1])))
    at_top = prefill * kp + top * transfer_s + decode * kd
    if at_top <= concurrency:
        spare = concurrency - at_top
        if top_p <= top_d:
            return top, kp + spare / prefill, kd, 1
        return top, kp, kd + spare / decode, 2
    previous_rate, previous = 0.0, 0.0
    for i in range(1, steps + 1):
        rate = top * i / steps
        now = held(rate)
        if now >= concurrency:
            share = (concurrency - previous) / (now - previous) if now > previous else 1.0
            x = previous_rate + share * (rate - previous_rate)
            return x, _k_at(k_p, x_p, x / prefill), _k_at(k_d, x_d, x / decode), 0
        previous_rate, previous = rate, now
    raise AssertionError("unreachable: held(top) > concurrency")


REGISTRY: dict[str, dict[str, object]] = {
    "disagg.balance": {"python": balance_python},
}
