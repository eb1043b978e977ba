"""The histogram stage: gradient sums per bin of the nodes a step builds, summed over the workers.

quantiser.py  a round's gradient pairs in the type the histograms sum (XGBoost's GradientQuantiser:
              int64 fixed point on the GPU, whose sums are exact in any order), sized alike on every worker
reference.py  float64 sums in row order in numpy (the oracle; the CPU path)
cuda.py       kernels/histogram.cu and histogram_children.cu launches (CuPy): the built children's
              histograms, and their siblings as parent minus child
"""
