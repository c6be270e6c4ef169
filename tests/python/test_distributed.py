"""torch.distributed with tpu tensors: the "pjrt" c10d backend (torch_pjrt.distributed), two
processes on 127.0.0.1. Every collective on tpu tensors matches gloo's on CPU tensors, DDP on two
ranks matches one process on the whole batch, object collectives and CPU groups keep working,
and the host transport is counted (scripts/collectives.py); DTensor, FSDP2, tensor parallelism
and a compiled DDP model on a tpu device mesh match one process on CPU (scripts/parallel.py),
at world sizes 1 and 2."""
import json
import os
import socket
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

import torch_pjrt
from tpu_helpers import child_env

SCRIPTS = os.path.join(os.path.dirname(__file__), "scripts")
pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed not built")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_ranks(script, world=2, timeout=300, args=(), check_rc=True, **env):
    """Runs scripts/|script| as |world| ranks; returns each rank's JSON results. Every process is
    bounded in time: a hang fails the test instead of stalling the suite."""
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, os.path.join(SCRIPTS, script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=child_env(RANK=r, WORLD_SIZE=world, MASTER_ADDR="127.0.0.1",
                                            MASTER_PORT=port, **env))
             for r in range(world)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            assert p.returncode == 0 or not check_rc, f"rank exited {p.returncode}:\n{out[-3000:]}\n{err[-3000:]}"
            lines = out.strip().splitlines()
            outs.append(json.loads(lines[-1]) if lines else None)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return outs


def test_backend_is_registered_for_tpu():
    assert dist.Backend.PJRT == "pjrt"
    assert dist.Backend.default_device_backend_map.get("tpu") == "pjrt"


@pytest.mark.parametrize("backend", [None, "cpu:gloo,tpu:pjrt"], ids=["default", "mixed"])
def test_collectives_and_ddp_on_two_ranks(backend):
    for rank, res in enumerate(_run_ranks("collectives.py", BACKEND=backend or "")):
        assert "tpu:pjrt" in res.pop("backend")
        _assert_all_true(rank, res)


@pytest.mark.parametrize("world", [1, 2])
def test_dtensor_fsdp2_tensor_parallel_and_compiled_ddp(world):
    for rank, res in enumerate(_run_ranks("parallel.py", world=world)):
        _assert_all_true(rank, res)


def _assert_all_true(rank, res):
    failed = [k for k, ok in res.items() if ok is not True]
    assert not failed, f"rank {rank}: {failed}"


@pytest.mark.parametrize("mode", ["shape", "op"])
def test_ranks_calling_different_collectives_raise_instead_of_hanging(mode):
    # gloo would reduce buffers of different sizes silently ("shape") or wait for the timeout
    # ("op"): every rank raises at once, naming what each rank called.
    for res in _run_ranks("faulty_rank.py", args=(mode,), timeout=120):
        assert res["raised"] and res["seconds"] < 10, res
        assert "called different collectives" in res["message"]
        assert ("float32[3]" in res["message"] and "float32[4]" in res["message"]) if mode == "shape" \
            else "broadcast" in res["message"]


def test_a_killed_rank_makes_the_other_raise():
    survivor, killed = _run_ranks("faulty_rank.py", args=("kill",), timeout=120, check_rc=False)
    assert killed is None  # rank 1 exited without a word
    assert survivor["raised"] and survivor["seconds"] < 35, survivor
