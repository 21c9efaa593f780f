"""The package as it ships: its version is the library's, and its sdist builds anywhere.

Both read the repository around python/ and skip outside a checkout.
"""

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import gbf

REPO = Path(__file__).resolve().parents[2]


def _checkout():
    if not (REPO / "include" / "gbf" / "version.hpp").is_file() or not (REPO / ".git").exists():
        pytest.skip("not run from a gbf checkout: nothing to compare the package with")
    return REPO


def _header_version(root):
    text = (root / "include" / "gbf" / "version.hpp").read_text()
    parts = [re.search(rf"^#define GBF_VERSION_{p} (\d+)$", text, re.M) for p in ("MAJOR", "MINOR", "PATCH")]
    assert all(parts), "include/gbf/version.hpp lacks a GBF_VERSION_MAJOR/MINOR/PATCH line"
    return ".".join(m.group(1) for m in parts)


def test_the_package_metadata_and_runtime_version_are_the_librarys():
    root = _checkout()
    version = _header_version(root)
    assert gbf.__version__ == version, "the extension was linked against another library version"
    pyproject = (root / "python" / "pyproject.toml").read_text()
    declared = re.search(r'^version = "([^"]+)"', pyproject, re.M)
    assert declared and declared.group(1) == version, (
        f"python/pyproject.toml says {declared and declared.group(1)}, include/gbf/version.hpp {version}")
    from importlib.metadata import version as installed_version
    assert installed_version("gbf") == version


def test_the_sdist_carries_the_library_and_configures_from_it_alone(tmp_path):
    root = _checkout()
    pytest.importorskip("scikit_build_core", reason="making an sdist needs scikit-build-core")
    pytest.importorskip("nanobind", reason="configuring the extension needs nanobind")
    if shutil.which("git") is None or shutil.which("cmake") is None:
        pytest.skip("making and configuring the sdist needs git and cmake")
    made = subprocess.run([str(root / "scripts" / "python_sdist.sh"), str(tmp_path / "dist")],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    sdist = Path(made.stdout.strip().splitlines()[-1])
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        if hasattr(tarfile, "data_filter"):  # Python 3.10.12+, 3.11.4+
            tar.extractall(tmp_path / "unpacked", filter="data")
        else:
            tar.extractall(tmp_path / "unpacked")
    for needed in ("pyproject.toml", "CMakeLists.txt", "src/module.cpp", "gbf/__init__.py",
                   "gbf_library/CMakeLists.txt", "gbf_library/include/gbf/version.hpp",
                   "gbf_library/include/gbf/filter.hpp", "gbf_library/host/filter.cpp",
                   "gbf_library/kernels/bloom.cu"):
        assert needed in names, f"the sdist lacks {needed}"
    assert not any(n.startswith(("build/", "gbf_library/tests/", "gbf_library/bench/")) for n in names)
    # Configure it where no repository is around it (the build compiles the same
    # sources the CMake build of this checkout compiles): every source file the
    # library's CMakeLists.txt lists must be in the sdist, or generation fails.
    source = tmp_path / "unpacked" / sdist.name[: -len(".tar.gz")]
    configured = subprocess.run(
        ["cmake", "-S", str(source), "-B", str(tmp_path / "build"), "-DGBF_ENABLE_CUDA=OFF",
         f"-DPython_EXECUTABLE={sys.executable}"],
        capture_output=True, text=True, env={**os.environ, "CMAKE_GENERATOR": "Unix Makefiles"})
    assert configured.returncode == 0, configured.stdout[-3000:] + configured.stderr[-3000:]
    assert "gbf python: CUDA backend OFF" in configured.stdout
