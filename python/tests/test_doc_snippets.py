"""The Python snippets of the README files and docs run as written, so a renamed
function, argument or result type shows here rather than in a user's first try.

Each ```python block runs in a fresh namespace, in a scratch directory, after a
prelude that makes the names the page leaves to the reader (`queries`, `keys`,
`v1`, the Parquet files, ...). Only a page's stand-ins for a real deployment are
replaced (docs/distributed.md's scheduler address and dataset folders); blocks
for hardware this machine lacks (torch on a GPU) are skipped, saying so."""

import pathlib
import re

import numpy as np
import pytest

import gbf

ROOT = pathlib.Path(__file__).resolve().parents[2]

PRELUDE = """
import pickle
import numpy as np
import gbf
rng = np.random.default_rng(7)
queries = rng.integers(0, 2**63, 1_000, dtype=np.uint64)
probe_keys = rng.integers(0, 2**63, 1_000, dtype=np.uint64)
batch = rng.integers(0, 2**63, 1_000, dtype=np.uint64)
keys = np.arange(10_000, dtype=np.uint64)
gone = keys[:100]
known = keys[100:200]
v1 = gbf.Filter(10_000, 0.01); v1.add(keys[:5_000])
v2 = gbf.Filter(10_000, 0.01); v2.add(keys)
ids = np.arange(0, 4_000, 7, dtype=np.int64)
i = 0
"""


def blocks(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


def cases():
    for page in ("README.md", "python/README.md", "docs/python.md", "docs/parquet.md", "docs/distributed.md"):
        for i, code in enumerate(blocks(page)):
            yield pytest.param(page, code, id=f"{page}#{i}")


def test_every_page_with_snippets_has_them():
    # A changed fence (```py, a renamed page) would silently run nothing.
    assert sum(1 for _ in cases()) >= 7


# dask's own read_parquet calls a pandas API that pandas 3.1 deprecates: not ours to fix.
@pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame.reset_index")
@pytest.mark.parametrize("page,code", list(cases()))
def test_snippet_runs(page, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if "torch.cuda" in code:
        torch = pytest.importorskip("torch", reason="the snippet drives a torch CUDA stream")
        if not torch.cuda.is_available() or not gbf.gpu_status()[0]:
            pytest.skip("the snippet drives a torch CUDA stream: no GPU here")
        code = "import torch\nf = gbf.Filter(100_000, 0.01, backend='gpu')\nkeys = torch.arange(1000, device='cuda')\n" + code
    if "gbf.parquet" in code:
        pa = pytest.importorskip("pyarrow")
        pp = pytest.importorskip("pyarrow.parquet")
        for name, start in (("f1.parquet", 0), ("f2.parquet", 2_000)):
            column = pa.array(np.arange(start, start + 2_000, dtype=np.int32))
            pp.write_table(pa.table({"user_id": column}), name, row_group_size=500,
                           bloom_filter_options={"user_id": {"ndv": 500, "fpp": 0.01}})
    if "gbf.dask" in code:
        pytest.importorskip("dask.dataframe")
        pa = pytest.importorskip("pyarrow")
        pp = pytest.importorskip("pyarrow.parquet")
        for folder, n in (("users", 1_000), ("events", 5_000)):
            (tmp_path / folder).mkdir()
            pp.write_table(pa.table({"user_id": np.arange(0, 2 * n, 2, dtype=np.int64)}),
                           tmp_path / folder / "part.0.parquet")
        # The page's scheduler address stands for the reader's cluster; without a
        # client Dask runs on its local scheduler, as the page says.
        code = code.replace('client = Client("scheduler:8786")', "client = None")
        code += "\nassert len(joined.compute()) > 0\n"
    exec(compile(PRELUDE + code, f"<{page}>", "exec"), {})
