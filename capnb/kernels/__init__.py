"""numba kernels: pure array maths over numpy arrays (no xarray, no validation, no I/O).

Kernels are declared with explicit signatures and compile on first call (see :mod:`._lazy`); compiled
code is cached on disk. The plain references they are tested against live outside the package, in
``benchmarks/reference/`` (the repository's, not the wheel's).
"""
