"""The split stage: the best split of each node from its histogram, and the rules a split must pass.

rules.py      leaf weight, gain, validity (XGBoost's arithmetic, type for type)
reference.py  evaluate_splits as array operations (numpy: the oracle and the CPU path; CuPy: the kernel's reference)
cuda.py       kernels/split.cu launches (CuPy)
"""

from .reference import evaluate_splits
from .rules import RT_EPS, SplitParams, calc_weight, child_gain, splits_applied, threshold_l1

__all__ = ["RT_EPS", "SplitParams", "calc_weight", "child_gain", "evaluate_splits", "splits_applied", "threshold_l1"]
