"""Shared fixtures: the C++ CLI (GBF_CLI), random keys."""

import os
import subprocess

import numpy as np
import pytest

import gbf


@pytest.fixture(scope="session")
def cli():
    """Path of the gbf command the answers are checked against (scripts/test.sh sets GBF_CLI
    to build/<preset>/cli/gbf)."""
    path = os.environ.get("GBF_CLI")
    if not path:
        pytest.skip("GBF_CLI is not set: these tests compare with the C++ CLI "
                    "(scripts/test.sh sets GBF_CLI=build/release/cli/gbf)")
    if not os.access(path, os.X_OK):
        pytest.fail(f"GBF_CLI={path} is not an executable")
    return path


@pytest.fixture
def run_cli(cli):
    """Runs the CLI with args; returns stdout; fails the test on a nonzero exit."""

    def run(*args, check=True):
        result = subprocess.run([cli, *map(str, args)], capture_output=True, text=True)
        if check and result.returncode != 0:
            pytest.fail(f"gbf {' '.join(map(str, args))} exited {result.returncode}: {result.stderr}")
        return result

    return run


@pytest.fixture
def rng():
    return np.random.default_rng(20240613)


# Every layout shape gbf supports, as the CLI spells them (W/K/SEED).
LAYOUTS = ["1/1/0", "1/4/3", "2/2/0", "2/7/1", "4/4/0", "4/9/5", "8/8/0", "8/12/7", "16/16/0", "16/32/2"]


def backends():
    """The backends this machine can run: cpu always, gpu when one is usable."""
    available, _ = gbf.gpu_status()
    return ["cpu", "gpu"] if available else ["cpu"]


class DLPackOnly:
    """An array seen only through DLPack (neither NumPy, CuPy nor torch to gbf)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()
