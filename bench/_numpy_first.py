"""Imported first by the benchmarks that use numpy, before numpy is: numpy's CPU features set as the
``trustscore`` command sets them (:func:`trustscore.cli.numpy_cpu.configure`: the AVX-512 sort off on
AMD Zen 4), so that a bench measures the code as served. :data:`NUMPY_CPU` says what was set.
"""

from __future__ import annotations

import os

from trustscore.cli import numpy_cpu

NUMPY_CPU = numpy_cpu.configure(os.environ)
