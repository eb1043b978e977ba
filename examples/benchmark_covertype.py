"""Covertype-shaped (523K x 54, 7 classes, depth 8, accuracy) benchmark against XGBoost: examples/benchmark.py with --sets covertype.

    python examples/benchmark_covertype.py                            # full size, on the GPU
    python examples/benchmark_covertype.py --rows 50000 --rounds 20 --device cpu

Any option of benchmark.py applies (--rows, --rounds, --device, --out, --skip-xgboost, ...).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmark import main  # noqa: E402

if __name__ == "__main__":
    main(["--sets", "covertype", *sys.argv[1:]])
