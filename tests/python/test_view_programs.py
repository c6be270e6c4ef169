"""Views read and written at memory speed: every regular view pattern (expand, strided slices,
diagonals, unfold's windows, overlapping or not, permutes, selects, flips of slices, their
compositions), read by copy, an elementwise op, a reduction or a matmul, and written in place or
by copy_, compiles to programs with no gather or scatter (slices, reshapes, transposes, pads and
broadcasts), and gives CPU's result bit for bit. Read from the programs' text
(TORCH_PJRT_DUMP_DIR), in a fresh process so that each is compiled."""
import json
import os
import subprocess
import sys

import pytest

from tpu_helpers import child_env

SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "view_programs.py")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    dump = tmp_path_factory.mktemp("programs")
    p = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, timeout=600,
                       env=child_env(TORCH_PJRT_DUMP_DIR=str(dump), TORCH_PJRT_CACHE_DIR="0",
                                     TORCH_PJRT_SHAPE_BUCKETS="off"))
    assert p.returncode == 0, p.stderr[-4000:]
    rep = json.loads(p.stdout.strip().splitlines()[-1])
    return {name: (r["equal"], [(dump / f).read_text() for f in r["files"]], r["files"])
            for name, r in rep.items()}


def _indexed(texts):
    return [w for w in ("stablehlo.gather", "stablehlo.scatter") if any(w in t for t in texts)]


def test_every_pattern_equals_cpu_bit_for_bit(report):
    assert not [n for n, (equal, _, _) in report.items() if not equal]


def test_regular_views_compile_no_gather_or_scatter(report):
    regular = {n: r for n, r in report.items() if not n.startswith("irregular/")}
    assert len(regular) >= 60
    # Each pattern compiled something (else the check would pass vacuously).
    assert not [n for n, (_, texts, _) in regular.items() if not texts]
    bad = {n: (files, _indexed(texts)) for n, (_, texts, files) in regular.items()
           if _indexed(texts)}
    assert not bad, bad


def test_irregular_view_still_gathers(report):
    # The control: a view slices cannot express reads with a gather, and the check sees it.
    (_, texts, _), = [r for n, r in report.items() if n.startswith("irregular/")]
    assert _indexed(texts) == ["stablehlo.gather"]
