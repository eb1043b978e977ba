"""Record layouts and constants shared by the Python code and the CUDA kernels, declared once.

kernels/common.cuh restates each dtype below as a C struct with the same field
order, sizes and padding.
"""

from __future__ import annotations

import numpy as np

# Gradient pair of one row: float32, as XGBoost's GradientPair. Arrays of them are
# (n_rows, 2) float32, column 0 the gradient and column 1 the hessian.
GPAIR_DTYPE = np.dtype(np.float32)

# A histogram bin holds (sum_grad, sum_hess). On the numpy backend the sums are
# float64; on CUDA they are int64 fixed point (see backend/cupy_backend.py).
# Histograms are arrays of shape (n_nodes, n_total_bins, 2).
HIST_FLOAT_DTYPE = np.dtype(np.float64)
HIST_FIXED_DTYPE = np.dtype(np.int64)

# The best split of one node, as the split evaluation returns it.
#   left_* / right_*: gradient sums of the two children (double, as XGBoost's GradStats)
#   gain:          loss change of the split (float32; <= 0 means no split was found)
#   threshold:     raw-value threshold; fvalue < threshold goes left
#   feature:       split feature, -1 when the node has no valid split
#   bin:           last feature-local bin that goes left (-1: only missing goes left)
#   default_left:  1 when missing values go left
SPLIT_DTYPE = np.dtype(
    [
        ("left_grad", "<f8"),
        ("left_hess", "<f8"),
        ("right_grad", "<f8"),
        ("right_hess", "<f8"),
        ("gain", "<f4"),
        ("threshold", "<f4"),
        ("feature", "<i4"),
        ("bin", "<i4"),
        ("default_left", "<i4"),
        ("_pad", "<i4"),
    ]
)

# One node of a tree ready for prediction. Leaves have left == -1 and hold value.
#   left / right:  child node ids within the tree (-1 for a leaf)
#   feature:       split feature
#   default_left:  1 when missing values go left
#   threshold:     fvalue < threshold goes left
#   value:         leaf value (already scaled by the learning rate)
PREDICT_NODE_DTYPE = np.dtype(
    [
        ("left", "<i4"),
        ("right", "<i4"),
        ("feature", "<i4"),
        ("default_left", "<i4"),
        ("threshold", "<f4"),
        ("value", "<f4"),
    ]
)

assert SPLIT_DTYPE.itemsize == 56
assert PREDICT_NODE_DTYPE.itemsize == 24

# The deepest tree growth/device.py grows: a level's splits fit the kernels' kMaxSplits =
# 2 ** (MAX_DEVICE_DEPTH - 1).
MAX_DEVICE_DEPTH = 12
