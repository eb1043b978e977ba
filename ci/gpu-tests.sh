#!/usr/bin/env bash
# Run the tests marked `gpu` on a machine with a CUDA GPU (a lent GPU machine,
# or any workstation with CuPy installed). From the repository root:
#
#   ci/gpu-tests.sh [extra pytest arguments]
#
# It runs `python -m pytest -q -m gpu tests` against the working tree (the
# repository root goes on PYTHONPATH; nothing is installed). A lent machine's
# image has CuPy, numpy, pandas, scipy, pytest and scikit-learn but no dask:
# fetch the missing wheels beforehand with ../shared/bin/device-wheels, which
# puts them in .whl/ (carry ".whl" to the machine); this script installs them
# into /tmp/site when that folder is there. Elsewhere, `pip install ".[cuda13,test]"`
# (or cuda12) is the set-up instead.
#
# Exit status: pytest's, except that "no tests collected" (5) and "no GPU"
# count as failures, since either means the GPU code went untested.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-$(command -v python || command -v python3)}

if compgen -G ".whl/*.whl" > /dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi

if ! "$PYTHON" -c "import sys; from daskgb.backend import cuda_available; sys.exit(0 if cuda_available() else 1)"; then
    echo "ci/gpu-tests.sh: CuPy is not installed or sees no GPU; the gpu tests would all be skipped" >&2
    exit 1
fi
"$PYTHON" -c "import cupy; d = cupy.cuda.runtime.getDeviceProperties(0); print('GPU:', d['name'].decode(), '| CuPy', cupy.__version__)"

status=0
"$PYTHON" -m pytest -q -m gpu tests "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "ci/gpu-tests.sh: no tests marked gpu were collected" >&2
    exit 1
fi
exit "$status"
