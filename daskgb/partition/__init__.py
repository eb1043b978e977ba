"""The partition stage: which node of the growing trees each row is in.

reference.py  numpy (the oracle; the CPU path)
cuda.py       kernels/partition.cu launches (CuPy): rows grouped by node, no host wait a level
"""
