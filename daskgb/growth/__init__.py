"""The growth stage: a round's trees from its quantised gradient pairs.

driver.py    which nodes a tree expands next (XGBoost's driver, both grow policies)
host.py      the host decides each step, the backend does the hot work (any backend, every option)
device.py    depthwise trees decided on the device, one host wait a round (CUDA)
graphs.py    device.py's rounds captured as CUDA graphs and replayed
"""
