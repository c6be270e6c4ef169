// torch_pjrt._C.collective: the device transport of the c10d backend (python/torch_pjrt/
// distributed.py) hands one collective of every participant, each tensor on a device of its own,
// to the C executor (exec/collective.h), which runs it as one replicated program. The host
// transport's pieces: aliases of device memory for gloo, and the board (runtime/board.h) where
// ranks on one host check their calls agree. See glue.h.
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <vector>

#include "torch/glue.h"

extern "C" {
#include "exec/collective.h"
#include "runtime/board.h"
}

namespace tp_glue {
namespace {

template <typename T>
T pick(const std::string& name, const char* const* names, int n, const char* what) {
  for (int i = 0; i < n; i++)
    if (name == names[i]) return static_cast<T>(i);
  TORCH_CHECK(false, "tpu collective: unknown ", what, " '", name, "'");
}

void collective(const std::string& kind, const std::string& op, int root,
                const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs) {
  TORCH_CHECK(!inputs.empty() && inputs.size() == outputs.size(),
              "tpu collective: one input and one output per participant");
  std::vector<tp_view_t> in(inputs.size()), out(outputs.size());
  for (size_t r = 0; r < inputs.size(); r++) {
    TORCH_CHECK(inputs[r].is_privateuseone() && outputs[r].is_privateuseone(),
                "tpu collective: participant ", r, "'s tensors are not on tpu");
    in[r] = view_or_throw(inputs[r], "collective input");
    out[r] = view_or_throw(outputs[r], "collective output");
  }
  tp_collective_t c{};
  c.kind = pick<tp_coll_kind_t>(kind, tp_coll_kind_names, TP_COLL_KIND_COUNT, "collective");
  c.op = pick<tp_coll_op_t>(op, tp_coll_op_names, TP_COLL_OP_COUNT, "reduction");
  c.root = root;
  c.n = static_cast<int>(inputs.size());
  c.inputs = in.data();
  c.outputs = out.data();
  tp_status_t* st;
  {
    py::gil_scoped_release no_gil;  // a compile can take a while; other ranks' threads wait
    st = tp_exec_collective(&c);
  }
  check(st);
}

// A CPU tensor aliasing |t|'s device memory, for the host transport to hand gloo with no copy:
// None when the device's memory is not host memory or |t| cannot be aliased (tp_eager_host_alias).
// It stays valid while nothing writes |t| (the transport holds it for one collective); it keeps
// |t|'s storage alive.
std::optional<at::Tensor> host_alias(const at::Tensor& t) {
  TORCH_CHECK(t.is_privateuseone(), "host_alias: expected a tpu tensor, got ", t.device());
  if (t.is_neg() || t.is_conj()) return std::nullopt;
  tp_view_t v = view_or_throw(t, "host_alias");
  void* p = nullptr;
  check(tp_eager_host_alias(&v, &p));
  if (!p) return std::nullopt;
  tp_storage_retain(v.storage);
  tp_storage_t* keep = v.storage;
  return at::from_blob(p, t.sizes(), t.strides(), [keep](void*) { tp_storage_release(keep); },
                       at::TensorOptions().dtype(t.scalar_type()).device(at::kCPU));
}

// The host transport's board (runtime/board.h) on |page|, a writable buffer (the shared mmap) the
// caller keeps alive and sized for |size| ranks.
void* board_page(py::buffer page, int size) {
  py::buffer_info info = page.request(/*writable=*/true);
  TORCH_CHECK(size > 0 && static_cast<size_t>(info.size * info.itemsize) >= TP_BOARD_BYTES(size),
              "board: a page of ", info.size * info.itemsize, " bytes cannot hold ", size, " ranks");
  return info.ptr;
}

void board_post(py::buffer page, int size, int rank, uint64_t seq, uint64_t digest) {
  TORCH_CHECK(rank >= 0 && rank < size, "board: rank ", rank, " of ", size);
  tp_board_post(board_page(page, size), rank, seq, digest);
}

int board_wait(py::buffer page, int size, uint64_t seq, int wait_ms) {
  void* p = board_page(page, size);
  py::gil_scoped_release no_gil;  // the other ranks' threads of this process run meanwhile
  return tp_board_wait(p, size, seq, wait_ms);
}

}  // namespace

void register_collective(py::module& m) {
  m.def("host_alias", &host_alias, py::arg("tensor"),
        "A CPU tensor sharing a tpu tensor's memory where the device's memory is host memory "
        "(the CPU plugin), else None; valid until the tpu tensor is next written.");
  m.def("collective", &collective, py::arg("kind"), py::arg("op"), py::arg("root"),
        py::arg("inputs"), py::arg("outputs"),
        "Runs one collective over participants' tpu tensors, each on a device of its own.");
  m.def("board_post", &board_post, py::arg("page"), py::arg("size"), py::arg("rank"),
        py::arg("seq"), py::arg("digest"),
        "Posts a rank's digest of call seq on the host transport's shared page.");
  m.def("board_wait", &board_wait, py::arg("page"), py::arg("size"), py::arg("seq"),
        py::arg("wait_ms"),
        "Waits up to wait_ms for every rank's post of call seq: 1 one digest, 0 differing, -1 late.");
}

}  // namespace tp_glue
