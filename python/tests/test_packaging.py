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


def _declared(text):
    """{name: signatures or None} of a stub's module level, and {class: {member: signatures}},
    a class's members including those of the stub-only bases it names. A signature is its
    parameters without types or default values: "(self, _, /, keys, *, out=)" (a
    positional-only parameter's name is "_", "=" marks one with a default)."""
    import ast

    def signature(f):
        a = f.args
        positional = a.posonlyargs + a.args
        defaulted = positional[len(positional) - len(a.defaults):]
        out = ["_" + "=" * (p in defaulted) for p in a.posonlyargs] + (["/"] if a.posonlyargs else [])
        out += [p.arg + "=" * (p in defaulted) for p in a.args]
        out += ["*" + a.vararg.arg] if a.vararg else ["*"] if a.kwonlyargs else []
        out += [p.arg + "=" * (d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
        return "(" + ", ".join(out + (["**" + a.kwarg.arg] if a.kwarg else [])) + ")"

    module, classes = {}, {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef):
            module.setdefault(node.name, []).append(signature(node))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            module[ast.unparse(node.targets[0] if isinstance(node, ast.Assign) else node.target)] = None
        elif isinstance(node, ast.ClassDef):
            module[node.name] = None
            members = {}
            for base in node.bases:
                members.update(classes.get(ast.unparse(base), {}))
            own = {}
            for f in node.body:
                if isinstance(f, ast.FunctionDef):
                    setter = any(ast.unparse(d).endswith(".setter") for d in f.decorator_list)
                    own.setdefault(f.name + (".setter" if setter else ""), []).append(signature(f))
            classes[node.name] = {**members, **own}
    return module, classes


def test_the_type_stubs_declare_what_the_extension_binds(tmp_path):
    """python/gbf/_core.pyi against the compiled module as nanobind's stubgen reads it: every
    function, class and member the extension binds is declared, no declared function or
    member is missing at runtime, and the parameters agree (names, positional-only for
    arguments bound without a name, keyword-only, which have defaults). mypy's stubtest
    cannot read nanobind's signatures, so it checks none of this."""
    root = _checkout()
    pytest.importorskip("nanobind.stubgen", reason="reading the extension's signatures needs nanobind")
    generated = tmp_path / "_core.pyi"
    made = subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-q", "-P", "-D", "-m", "gbf._core",
                           "-i", str(Path(gbf.__file__).resolve().parents[1]), "-o", str(generated)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    runtime, runtime_classes = _declared(generated.read_text())
    stub, stub_classes = _declared((root / "python" / "gbf" / "_core.pyi").read_text())
    problems = [f"{name}: not declared" for name in runtime if name not in stub]
    # Stub-only type aliases, protocols and bases are fine; a stub-only function is not.
    problems += [f"{name}: declared, not bound" for name, sigs in stub.items() if sigs and name not in runtime]
    pairs = [(name, sigs, stub.get(name)) for name, sigs in runtime.items() if sigs]
    for cls, members in runtime_classes.items():
        declared = stub_classes.get(cls, {})
        problems += [f"{cls}.{m}: not declared" for m in members if m not in declared]
        problems += [f"{cls}.{m}: declared, not bound" for m in declared if m not in members]
        pairs += [(f"{cls}.{m}", sigs, declared.get(m)) for m, sigs in members.items()]
    for name, bound, declared in pairs:
        problems += [f"{name}: declared {d}, bound {bound[-1]}" for d in declared or [] if d != bound[-1]]
    assert not problems, "python/gbf/_core.pyi differs from gbf._core:\n" + "\n".join(problems)


def test_the_package_type_checks_clean_under_mypy(tmp_path):
    """mypy over the package's sources and its stub (python/gbf): no errors. Users who type-check
    their code read these annotations; a wrong one fails their build, not ours."""
    root = _checkout()
    pytest.importorskip("mypy", reason="type-checking the package needs mypy (scripts/setup.sh installs it)")
    # pyarrow, dask and the array libraries ship without annotations: their imports are Any.
    checked = subprocess.run([sys.executable, "-m", "mypy", "-p", "gbf", "--ignore-missing-imports",
                              "--cache-dir", str(tmp_path / "cache"), "--no-error-summary"],
                             capture_output=True, text=True, cwd=root / "python")
    assert checked.returncode == 0, "mypy -p gbf:\n" + checked.stdout + checked.stderr
