"""Yahoo-LTR-shaped (~475K x 700, 20K queries, rank:ndcg, depth 8, NDCG@10) benchmark against XGBoost: examples/benchmark.py with --sets ranking.

    python examples/benchmark_ltr.py                            # full size, on the GPU
    python examples/benchmark_ltr.py --rows 50000 --rounds 20 --device cpu

Any option of benchmark.py applies (--rows, --rounds, --device, --out, --skip-xgboost, ...).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmark import main  # noqa: E402

if __name__ == "__main__":
    main(["--sets", "ranking", *sys.argv[1:]])
