// The device transport of the c10d backend: the ranks of a group, threads of this process, each
// on a device of its own, meet for each collective (Meeting), and the last to arrive hands one
// collective of every rank to the C executor (exec/collective.h), which runs it as one
// replicated program. See distributed.h.
#include <chrono>

#include "torch/distributed/distributed.h"

extern "C" {
#include "exec/collective.h"
}

namespace tp_glue {
namespace {

template <typename T>
T pick(const std::string& name, const char* const* names, int n, const char* what) {
  for (int i = 0; i < n; i++)
    if (name == names[i]) return static_cast<T>(i);
  TORCH_CHECK(false, "tpu collective: unknown ", what, " '", name, "'");
}

// Runs one collective of |inputs|[r] -> |outputs|[r] over the participants; the caller does not
// hold the GIL (a compile can take a while; other ranks' threads run meanwhile).
void run_collective(const std::string& kind, const std::string& op, int root,
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
  check(tp_exec_collective(&c));
}

void collective(const std::string& kind, const std::string& op, int root,
                const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs) {
  py::gil_scoped_release no_gil;
  run_collective(kind, op, root, inputs, outputs);
}

}  // namespace

// A call of the meeting. The last rank to let go of a call may be a native one, without the GIL,
// and a call that was abandoned or mismatched may still hold some Python rank's objects.
struct Meeting::Call {
  explicit Call(int n) : descs(n), payloads(n), inputs(n), outputs(n), left(n) {}
  ~Call() {
    bool python = action || result;
    for (auto& p : payloads) python = python || p;
    if (!python) return;  // a native call's: nothing of Python's, no GIL to take
    if (!Py_IsInitialized()) {
      for (auto& p : payloads) p.release();
      action.release();
      result.release();
      return;
    }
    py::gil_scoped_acquire gil;
    payloads.clear();
    action = py::object();
    result = py::object();
  }
  std::vector<std::string> descs;
  int arrived = 0;
  std::vector<py::object> payloads;            // a Python action's parts
  py::object action;
  std::vector<at::Tensor> inputs, outputs;     // a native collective's parts
  bool native = false;                         // a native collective (else a Python action):
  std::string kind, op;                        // its kind ("": a barrier) and reduction,
  int root = 0;                                // and root
  bool done = false, failed = false;
  std::string error;                           // a mismatch, a failed native call
  tp_status_code_t code = TP_UNKNOWN;          // and its kind, to raise it as its type
  py::object result;                           // the action's result or exception
  int left;
};

// The ranks wait here without the GIL: a Python condition variable cost each rank two more
// handoffs of it per call, and the GIL is what 4 ranks on 2 cores queue for.
Meeting::Meeting(int size) : size_(size), seq_(size, 0) {
  TORCH_CHECK(size > 0 && size <= 64, "pjrt meeting: ", size, " ranks");
}

void Meeting::run(int rank, const std::string& desc, const std::string& kind,
                  const std::string& op, int root, const at::Tensor& input,
                  const at::Tensor& output, double timeout) {
  std::shared_ptr<Call> call;
  std::string abandoned;
  {
    std::optional<py::gil_scoped_release> no_gil;
    if (PyGILState_Check()) no_gil.emplace();
    call = join(rank, desc, timeout, abandoned, [&](Call& c) {
      c.inputs[rank] = input;
      c.outputs[rank] = output;
      c.native = true;
      c.kind = kind;
      c.op = op;
      c.root = root;
    });
  }
  finish(call, abandoned);
}

py::tuple Meeting::join_py(int rank, const std::string& desc, py::object payload,
                           py::object action, double timeout) {
  std::shared_ptr<Call> call;
  std::string abandoned;
  {
    py::gil_scoped_release no_gil;  // the objects move below: no reference count changes
    call = join(rank, desc, timeout, abandoned, [&](Call& c) {
      c.payloads[rank] = std::move(payload);
      if (!c.action) c.action = std::move(action);
    });
  }
  finish(call, abandoned);
  if (call->failed) return py::make_tuple(false, call->result);
  return py::make_tuple(true, call->result);
}

void Meeting::breaks(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_.empty()) broken_ = why;
  cv_.notify_all();
}

// Brings this rank's part (|put|, under the lock) to its next call; the last rank runs it.
// Returns the call, finished unless |abandoned| says why not. Called without the GIL; the
// call, which may hold Python objects, is released by the caller with the GIL.
template <typename Put>
std::shared_ptr<Meeting::Call> Meeting::join(int rank, const std::string& desc, double timeout,
                                             std::string& abandoned, Put put) {
  TORCH_CHECK(rank >= 0 && rank < size_, "pjrt meeting: rank ", rank, " of ", size_);
  std::unique_lock<std::mutex> lock(mu_);
  TORCH_CHECK(broken_.empty(), "pjrt: ", desc, " abandoned: ", broken_);
  uint64_t seq = ++seq_[rank];
  auto& slot = calls_[seq];
  if (!slot) slot = std::make_shared<Call>(size_);
  std::shared_ptr<Call> call = slot;
  call->descs[rank] = desc;
  put(*call);
  if (++call->arrived == size_) {
    lock.unlock();
    execute(*call);
    lock.lock();
    call->done = true;
    cv_.notify_all();
  } else {
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(timeout));
    while (!call->done && broken_.empty()) {
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !call->done) {
        std::string missing;
        for (int r = 0; r < size_; r++)
          if (call->descs[r].empty()) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        broken_ = "pjrt: timed out after " + std::to_string(static_cast<int>(timeout)) +
                  " s waiting for ranks [" + missing + "] to call " + desc;
        cv_.notify_all();
      }
    }
  }
  if (--call->left == 0) calls_.erase(seq);
  if (!call->done) abandoned = "pjrt: " + desc + " abandoned: " + broken_;
  return call;
}

// Runs |c| for every rank (the last rank to arrive; no lock held, no GIL).
void Meeting::execute(Call& c) {
  for (int r = 1; r < size_; r++) {
    if (c.descs[r] != c.descs[0]) {
      c.error = "pjrt: the ranks of a process group called different collectives: ";
      for (int k = 0; k < size_; k++)
        c.error += (k ? "; rank " : "rank ") + std::to_string(k) + ": " + c.descs[k];
      return;
    }
  }
  if (c.native && c.kind.empty()) return;  // a barrier
  if (c.native) {
    try {
      run_collective(c.kind, c.op, c.root, c.inputs, c.outputs);
    } catch (const c10::Error& e) {  // each rank raises it as the type it had (throw_status)
      c.error = e.what_without_backtrace();
      if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) c.code = TP_RESOURCE_EXHAUSTED;
      else if (dynamic_cast<const c10::NotImplementedError*>(&e)) c.code = TP_UNIMPLEMENTED;
      else if (dynamic_cast<const c10::IndexError*>(&e)) c.code = TP_OUT_OF_RANGE;
    } catch (const std::exception& e) {
      c.error = e.what();
    }
    c.inputs.clear();
    c.outputs.clear();
    return;
  }
  py::gil_scoped_acquire gil;
  py::list parts;
  for (auto& p : c.payloads) parts.append(p);
  try {
    c.result = c.action(parts);
  } catch (py::error_already_set& e) {
    c.failed = true;
    c.result = e.value();
  }
}

// Raises the call's error on this rank, if any (with the GIL).
void Meeting::finish(const std::shared_ptr<Call>& call, const std::string& abandoned) {
  TORCH_CHECK(abandoned.empty(), abandoned);
  if (!call->error.empty()) throw_status(tp_make_status(call->code, "%s", call->error.c_str()));
}

void register_meeting(py::module& m) {
  py::class_<Meeting, std::shared_ptr<Meeting>>(m, "Meeting",
      "Where the in-process ranks of one group of the device transport meet for each collective.")
      .def(py::init<int>(), py::arg("size"))
      .def("run", &Meeting::run, py::arg("rank"), py::arg("desc"), py::arg("kind"), py::arg("op"),
           py::arg("root"), py::arg("input"), py::arg("output"), py::arg("timeout"),
           "Joins this rank's next call, a collective of the C executor on its input -> output.")
      .def("join", &Meeting::join_py, py::arg("rank"), py::arg("desc"), py::arg("payload"),
           py::arg("action"), py::arg("timeout"),
           "Joins this rank's next call, action([payloads]) run by the last rank: (True, result) "
           "or (False, the exception it raised).")
      .def("breaks", &Meeting::breaks, py::arg("why"),
           "Makes every waiting and later join raise, saying why.");
  m.def("collective", &collective, py::arg("kind"), py::arg("op"), py::arg("root"),
        py::arg("inputs"), py::arg("outputs"),
        "Runs one collective over participants' tpu tensors, each on a device of its own.");
}

}  // namespace tp_glue
