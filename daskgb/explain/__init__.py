"""What a prediction is made of: each feature's contribution to a row's margin (exact TreeSHAP,
and Saabas's approximation) and the leaf each tree sends a row to.

paths.py      the trees as root-to-leaf paths, the form the SHAP code walks (host numpy)
reference.py  numpy (the oracle; the CPU path)
cuda.py       kernels/shap.cu launches (CuPy)
"""
