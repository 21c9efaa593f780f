# Sourced by the scripts from the repository root: puts nvcc on PATH when the
# toolkit is in its default place.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
# scripts/setup.sh's virtual environment, where it made one (a Python that
# refuses pip installs, or a cmake too old): its python3 and cmake come first.
if [ -x "$PWD/build/venv/bin/python3" ]; then
  export PATH="$PWD/build/venv/bin:$PATH"
fi
