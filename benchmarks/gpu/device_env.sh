# Sourced by the device-call scripts (parity_call.sh, entries_call.sh): installs the carried
# wheels (.whl/: keras, namex, optree, ...) into /tmp/site unless NO_WHEELS is set (a CPU
# smoke test here), puts them and the repository on PYTHONPATH, and selects JAX. Needs PYTHON.
if [ -d .whl ] && [ -z "${NO_WHEELS:-}" ]; then
  $PYTHON -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
export KERAS_BACKEND=jax PYTHONUNBUFFERED=1
