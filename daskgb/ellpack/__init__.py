"""The ELLPACK stage: rows quantised to their bins and bit-packed, in core or as pages.

layout.py     the Ellpack matrix, its dense and sparse layouts, the builders (from_dense, from_csr)
reference.py  quantising, packing and reading rows in numpy (the oracle; the CPU path)
cuda.py       the same as kernels/ellpack.cu launches (CuPy), and host pages' copies
pages.py      a matrix as pages of rows in host memory or files, streamed to the device
"""

from .layout import (Ellpack, bits_for, dense_input_layout, dense_layout, from_csr, from_dense, n_words,
                     pack_dense_as, sparse_layout)

__all__ = ["Ellpack", "bits_for", "dense_input_layout", "dense_layout", "from_csr", "from_dense", "n_words",
           "pack_dense_as", "sparse_layout"]
