"""torch.compile(backend="tpu").

Today the backend captures the graph with Dynamo and AOTAutograd (forward and backward graphs of
functional ATen ops) and runs each graph through the eager tpu executor: every node is one cached
device program, exactly as in eager mode, with the same fallback accounting. Lowering a whole graph
into one StableHLO module through the same C emitters is the next step (see the README's limits).
Registered with Dynamo through the `torch_dynamo_backends` entry point, so nothing is imported
until a user asks for the backend.
"""
import torch

_stats = {"graphs": 0}


def stats():
    """Graphs compiled by this backend (forward and backward counted separately)."""
    return dict(_stats)


def _compile_graph(gm, example_inputs):
    _stats["graphs"] += 1
    return gm  # a GraphModule of ATen ops: runs op by op on the tpu eager path


def backend(gm, example_inputs, **kwargs):
    """The Dynamo backend callable named "tpu"."""
    from torch._dynamo.backends.common import aot_autograd
    return aot_autograd(fw_compiler=_compile_graph, bw_compiler=_compile_graph)(gm, example_inputs)
