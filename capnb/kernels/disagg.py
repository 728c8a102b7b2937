"""Disaggregated-serving kernel: where a closed loop of requests settles across a prefill and a decode pool.

A disaggregated fleet runs ``P`` prefill instances and ``D`` decode instances; a request is prefilled
on one, its KV cache is moved to a decode instance (``transfer_s``), and decoded there. With ``c``
requests in flight in total (a closed loop: a finished request is replaced at once), each pool
holds some of them. Each pool is described by its own closed-loop curve: requests/s one instance
completes, ``x(k)``, at ``k`` requests in flight on it (made non-decreasing, ``x(0) = 0``).

In steady state both pools complete the system's throughput ``X``: a prefill instance holds
``k_p = x_p^-1(X / P)``, a decode instance ``k_d = x_d^-1(X / D)``, and ``X transfer_s`` requests are
on the wire (Little's law). ``X`` is the throughput at which they add up to ``c``::

    c = P k_p(X / P) + X transfer_s + D k_d(X / D)

The right side grows with ``X``; :func:`balance` finds ``X`` by bisection on
``[0, min(P x_p(max), D x_d(max))]``. When the requests outnumber what the pools hold at that
ceiling (the slower pool saturated), the rest queue at the saturated pool: its ``k`` takes them.

The plain reference (a fine scan of ``X``) is :mod:`benchmarks.reference.disagg`.
"""

from __future__ import annotations

import numpy as np

from ._lazy import njit

__all__ = ["balance", "inverse"]


@njit
def inverse(k, x, target):
    """Smallest ``k`` at which the piecewise-linear curve through (0, 0), (k[i], x[i]) reaches ``target``.

    ``x`` non-decreasing; ``inf`` when ``target`` exceeds ``x[-1]``.
    """
    if target <= 0.0:
        return 0.0
    k0 = 0.0
    x0 = 0.0
    for i in range(k.shape[0]):
        if x[i] >= target:
            if x[i] == x0:
                return k0
            return k0 + (target - x0) * (k[i] - k0) / (x[i] - x0)
        k0 = k[i]
        x0 = x[i]
    return np.inf


@njit
def _held(rate, prefill, decode, transfer_s, k_p, x_p, k_d, x_d):
    return (
        prefill * inverse(k_p, x_p, rate / prefill)
        + rate * transfer_s
        + decode * inverse(k_d, x_d, rate / decode)
    )


@njit
def balance(concurrency, prefill, decode, transfer_s, k_p, x_p, k_d, x_d, out):
    """Fill ``out`` (4) with (X requests/s, k_p, k_d, saturated: 0 none, 1 prefill, 2 decode).

    ``concurrency`` requests in flight over ``prefill`` and ``decode`` instances; ``k_*`` ascending
    concurrencies of each pool's curve, ``x_*`` its requests/s (non-decreasing).
    """
    top_p = x_p[x_p.shape[0] - 1]
    top_d = x_d[x_d.shape[0] - 1]
    top = min(prefill * top_p, decode * top_d)
    lo = 0.0
    hi = top
    # at the ceiling, per instance (capped: top / n can round past the curve's last value)
    kp = inverse(k_p, x_p, min(top / prefill, top_p))
    kd = inverse(k_d, x_d, min(top / decode, top_d))
    if prefill * kp + top * transfer_s + decode * kd <= concurrency:
        rate = top
        spare = concurrency - (prefill * kp + rate * transfer_s + decode * kd)
        if prefill * x_p[x_p.shape[0] - 1] <= decode * x_d[x_d.shape[0] - 1]:
            kp = kp + spare / prefill
            out[3] = 1.0
        else:
            kd = kd + spare / decode
            out[3] = 2.0
        out[0] = rate
        out[1] = kp
        out[2] = kd
        return
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _held(mid, prefill, decode, transfer_s, k_p, x_p, k_d, x_d) < concurrency:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * top:
            break
    rate = 0.5 * (lo + hi)
    out[0] = rate
    out[1] = inverse(k_p, x_p, rate / prefill)
    out[2] = inverse(k_d, x_d, rate / decode)
    out[3] = 0.0
