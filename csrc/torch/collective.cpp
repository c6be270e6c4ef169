// torch_pjrt._C.collective: the device transport of the c10d backend (python/torch_pjrt/
// distributed.py) hands one collective of every participant, each tensor on a device of its own,
// to the C executor (exec/collective.h), which runs it as one replicated program. The host
// transport's pieces: aliases of device memory for gloo, and the board (dist/board.h) where
// ranks on one host check their calls agree. See glue.h.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "torch/glue.h"

extern "C" {
#include "exec/collective.h"
#include "dist/board.h"
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

// Where the ranks of one group of the device transport, threads of this process, meet for each
// collective, in call order: each rank brings its call's description and its part; the last to
// arrive checks that the descriptions agree and runs the call for all of them: a collective of
// the C executor, or a Python action given the ranks' parts. The ranks wait here without the GIL
// (a Python condition variable cost each rank two more handoffs of it per call, and the GIL is
// what 4 ranks on 2 cores queue for). breaks() makes every waiting and later join raise.
class Meeting {
 public:
  explicit Meeting(int size) : size_(size), seq_(size, 0) {
    TORCH_CHECK(size > 0 && size <= 64, "pjrt meeting: ", size, " ranks");
  }

  // A native collective: this rank's |input| -> |output| (|kind| empty: none, a barrier).
  // Called with or without the GIL; waits without it.
  void run(int rank, const std::string& desc, const std::string& kind, const std::string& op,
           int root, const at::Tensor& input, const at::Tensor& output, double timeout) {
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

  // A Python action: action([every rank's payload]) run by the last rank; returns (True, its
  // result) or (False, the exception it raised), the same for every rank.
  py::tuple join_py(int rank, const std::string& desc, py::object payload, py::object action,
                    double timeout) {
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

  void breaks(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.empty()) broken_ = why;
    cv_.notify_all();
  }

 private:
  struct Call {
    explicit Call(int n) : descs(n), payloads(n), inputs(n), outputs(n), left(n) {}
    // The last rank to let go of a call may be a native one, without the GIL, and a call that
    // was abandoned or mismatched may still hold some Python rank's objects.
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

  // Brings this rank's part (|put|, under the lock) to its next call; the last rank runs it.
  // Returns the call, finished unless |abandoned| says why not. Called without the GIL; the
  // call, which may hold Python objects, is released by the caller with the GIL.
  template <typename Put>
  std::shared_ptr<Call> join(int rank, const std::string& desc, double timeout,
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
  void execute(Call& c) {
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
  static void finish(const std::shared_ptr<Call>& call, const std::string& abandoned) {
    TORCH_CHECK(abandoned.empty(), abandoned);
    if (!call->error.empty()) throw_status(tp_make_status(call->code, "%s", call->error.c_str()));
  }

  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> seq_;
  std::map<uint64_t, std::shared_ptr<Call>> calls_;
  std::string broken_;
};

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

// A rank's side of its group's board (dist/board.h): the host transport's check on one host.
// The page is a writable buffer (the shared mmap) that distributed.py's _Board keeps alive as long
// as the transport lives; the call numbers are kept here, so that the transport's Python calls and
// the backend's native ones number their calls as one sequence.
class Board {
 public:
  Board(py::buffer page, int size, int rank) : size_(size), rank_(rank) {
    py::buffer_info info = page.request(/*writable=*/true);
    TORCH_CHECK(size > 0 && rank >= 0 && rank < size &&
                static_cast<size_t>(info.size * info.itemsize) >= TP_BOARD_BYTES(size),
                "board: a page of ", info.size * info.itemsize, " bytes for rank ", rank, " of ",
                size);
    page_ = info.ptr;
  }

  // Posts this rank's next call's |digest|; returns the call's number.
  uint64_t post(uint64_t digest) {
    std::lock_guard<std::mutex> lock(mu_);
    tp_board_post(page_, rank_, ++seq_, digest);
    return seq_;
  }

  // tp_board_wait: 1 every rank posted call |seq| with one digest, 0 different ones, -1 not yet.
  // Waits without the GIL.
  int state(uint64_t seq, int wait_ms) {
    std::optional<py::gil_scoped_release> no_gil;
    if (wait_ms > 0 && PyGILState_Check()) no_gil.emplace();
    return tp_board_wait(page_, size_, seq, wait_ms);
  }

 private:
  void* page_;
  const int size_, rank_;
  std::mutex mu_;
  uint64_t seq_ = 0;
};

// A call's digest as ranks post it: 56 bits of its description's FNV-1a hash.
uint64_t call_digest(const std::string& desc) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : desc) h = (h ^ c) * 1099511628211ull;
  return h & ((1ull << 56) - 1);
}

// Calls per transport and collective, of the backend's native collectives (the Python ones count
// in python/torch_pjrt/distributed.py; collective_counts() adds the two).
std::mutex g_counts_mu;
std::map<std::string, std::map<std::string, int64_t>> g_counts;

void count(const char* transport, const char* name) {
  std::lock_guard<std::mutex> lock(g_counts_mu);
  g_counts[transport][name]++;
}

// A call as ranks compare it, as distributed.py's _describe writes it: "allreduce(float32[3, 4],
// SUM)"; |op| null: no reduction.
std::string describe(const std::string& name, const at::Tensor& t, const char* op) {
  std::string d = name + "(" + tp_dtype_name(to_tp(t.scalar_type())) + "[";
  for (int64_t i = 0; i < t.dim(); i++) d += (i ? ", " : "") + std::to_string(t.size(i));
  return d + "]" + (op ? std::string(", ") + op : std::string()) + ")";
}

// c10d's reduction as the C executor names it; null for PREMUL_SUM (its factor is Python's).
const char* op_name(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    default: return nullptr;
  }
}

// A finished Work whose result is |tensors| (enqueued on the device: ordered before any later
// use, as an op's results are).
c10::intrusive_ptr<c10d::Work> done(const std::vector<at::Tensor>& tensors) {
  auto fut = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  fut->markCompleted(c10::IValue(tensors));
  return c10d::Work::create_from_future(fut);
}

// The Work of a transport's call that finishes later (distributed.py's _Later: an async send or
// recv): done when its Python object says so, finished by its wait().
class Later : public c10d::Work {
 public:
  explicit Later(py::object later) : py_(std::move(later)) {}

  ~Later() override {
    if (!Py_IsInitialized()) {
      py_.release();
      return;
    }
    py::gil_scoped_acquire gil;
    py_ = py::object();
  }

  bool isCompleted() override {
    if (done_) return true;
    py::gil_scoped_acquire gil;
    return py_.attr("is_completed")().cast<bool>();
  }

  bool wait(std::chrono::milliseconds timeout) override {
    if (!done_) {
      py::gil_scoped_acquire gil;
      py_.attr("wait")(timeout == kNoTimeout ? py::object(py::none())
                                             : py::object(py::float_(timeout.count() / 1e3)));
      done_ = true;
    }
    return true;
  }

 private:
  py::object py_;
  std::atomic<bool> done_{false};
};

// The "pjrt" c10d backend. Its transport, a Python object (distributed.py), holds the group's
// state and every collective; this C++ class runs the common collectives itself, where a Python
// backend took the GIL several times per call (the trampoline, the method, its Future), which
// ranks queue for on a loaded host. On the device transport (all_reduce, broadcast, all_gather
// and reduce_scatter into one tensor, barrier) a rank meets the others and returns without taking
// the GIL once (measured: a fifth of a 4-rank 1 MiB all_reduce on 2 cores, two fifths at 4 KiB).
// On the host transport (all_reduce, broadcast, all_gather and reduce_scatter into one tensor, on
// tensors gloo can alias) it checks the call on the board and runs gloo's (a 4 KiB all_gather of
// 2 ranks: from 1.3-1.6x gloo's time on CPU tensors to 1.1x). The coalesced forms are the plain
// ones in turn. Every other call is the transport's method of that name.
class PjrtBackend : public c10d::Backend {
 public:
  PjrtBackend(int rank, int size, py::object transport)
      : Backend(rank, size), py_(std::move(transport)) {
    if (py_.attr("transport").cast<std::string>() == "device") {
      meeting_ = py_.attr("_meeting").cast<std::shared_ptr<Meeting>>();
      timeout_ = py_.attr("_timeout").cast<double>();
    } else if (!py_.attr("_checked").cast<bool>() || !py_.attr("_board").is_none()) {
      // The host transport, unchecked or checked on a board (checks through gloo stay Python's).
      gloo_ = py_.attr("_gloo").cast<c10::intrusive_ptr<c10d::Backend>>();
      if (!py_.attr("_board").is_none())
        board_ = py_.attr("_board").attr("_c").cast<std::shared_ptr<Board>>();
    }
  }

  ~PjrtBackend() override {
    if (!Py_IsInitialized()) {
      py_.release();  // the interpreter is gone: nothing to give back
      return;
    }
    py::gil_scoped_acquire gil;
    py_ = py::object();
    board_.reset();
    gloo_.reset();
  }

  const py::object& transport() const { return py_; }

  const std::string getBackendName() const override { return "pjrt"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& ts,
                                           const c10d::BroadcastOptions& opts) override {
    if (gloo_ && ts.size() == 1) {
      std::vector<at::Tensor> hosts = aliases(ts);
      if (!hosts.empty()) {
        host("broadcast", describe("broadcast", ts[0], nullptr),
             [&] { return gloo_->broadcast(hosts, opts); });
        return done(ts);
      }
    }
    if (!meeting_ || ts.size() != 1) return call("broadcast", ts, opts);
    std::string name = "broadcast@" + std::to_string(opts.rootRank);
    native("broadcast", describe(name, ts[0], nullptr), "broadcast", "SUM", opts.rootRank, ts[0],
           ts[0]);
    return done(ts);
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& ts,
                                           const c10d::AllreduceOptions& opts) override {
    const char* op = op_name(opts.reduceOp);
    if (gloo_ && ts.size() == 1 && op) {
      std::vector<at::Tensor> hosts = aliases(ts);
      if (!hosts.empty()) {
        bool avg = opts.reduceOp == c10d::ReduceOp::AVG;  // gloo has none: SUM, then divide
        c10d::AllreduceOptions o = opts;
        if (avg) o.reduceOp = c10d::ReduceOp::SUM;
        host("allreduce", describe("all_reduce", ts[0], op),
             [&] { return gloo_->allreduce(hosts, o); });
        if (avg) average(hosts[0]);
        return done(ts);
      }
    }
    if (!meeting_ || ts.size() != 1 || !op) return call("allreduce", ts, opts);
    native("allreduce", describe("allreduce", ts[0], op), "all_reduce", op, 0, ts[0], ts[0]);
    return done(ts);
  }

  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& out, at::Tensor& in,
                                                   const c10d::AllgatherOptions& opts) override {
    if (gloo_) {
      std::vector<at::Tensor> hosts = aliases({in, out});
      if (!hosts.empty()) {
        host("all_gather_single", describe("all_gather_into_tensor", in, nullptr),
             [&] { return gloo_->_allgather_base(hosts[1], hosts[0], opts); });
        return done({out});
      }
    }
    if (!meeting_) return call("all_gather_single", out, in, opts);
    native("all_gather_single", describe("all_gather_single", in, nullptr), "all_gather", "SUM",
           0, in, out);
    return done({out});
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                 const c10d::AllgatherOptions& opts) override {
    return all_gather_single(out, in, opts);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(
      at::Tensor& out, at::Tensor& in, const c10d::ReduceScatterOptions& opts) override {
    const char* op = op_name(opts.reduceOp);
    if (gloo_ && op && in.numel() == out.numel() * getSize() && in.dtype() == out.dtype()) {
      std::vector<at::Tensor> hosts = aliases({in, out});
      if (!hosts.empty()) {
        // gloo's own reduce_scatter took 2.5x the time of its all_reduce of the whole input at
        // 4 MiB (2 ranks, CPU tensors): the input's copy is all-reduced, this rank's part kept.
        // The copies are memcpy: a parallel ATen copy leaves OpenMP's threads spinning, which
        // took the cores from gloo's threads (copy, then all_reduce: 10.0 ms against 4.4 ms).
        size_t part = out.numel() * out.element_size();
        std::vector<at::Tensor> flat{at::empty({in.numel()}, hosts[0].options())};
        std::memcpy(flat[0].data_ptr(), hosts[0].data_ptr(), part * getSize());
        bool avg = opts.reduceOp == c10d::ReduceOp::AVG;
        c10d::AllreduceOptions o;
        o.reduceOp = avg ? c10d::ReduceOp(c10d::ReduceOp::SUM) : opts.reduceOp;
        o.timeout = opts.timeout;
        host("reduce_scatter_single", describe("reduce_scatter_tensor", in, op),
             [&] { return gloo_->allreduce(flat, o); });
        std::memcpy(hosts[1].data_ptr(), static_cast<char*>(flat[0].data_ptr()) + part * getRank(),
                    part);
        if (avg) average(hosts[1]);
        return done({out});
      }
    }
    if (!meeting_ || !op) return call("reduce_scatter_single", out, in, opts);
    native("reduce_scatter_single", describe("reduce_scatter_single", in, op), "reduce_scatter",
           op, 0, in, out);
    return done({out});
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& out, at::Tensor& in, const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_single(out, in, opts);
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    if (!meeting_) return call("barrier", opts);
    native("barrier", "barrier", "", "", 0, at::Tensor(), at::Tensor());
    return done({});
  }

  // The coalesced forms (FSDP's, _coalescing_manager's): the plain form on each tensor in turn,
  // native where that one is, each with its own copy of the options (the transport's Python
  // changes a PREMUL_SUM or AVG it runs as SUM in place).
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& ts, const c10d::AllreduceCoalescedOptions& opts) override {
    for (at::Tensor& t : ts) {
      std::vector<at::Tensor> one{t};
      c10d::AllreduceOptions o = opts;
      allreduce(one, o)->wait();
    }
    return done(ts);
  }
  c10::intrusive_ptr<c10d::Work> all_gather_single_coalesced(
      std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins,
      const c10d::AllgatherOptions& opts) override {
    return each(outs, ins, [&](at::Tensor& o, at::Tensor& i) { return all_gather_single(o, i, opts); });
  }
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins,
      const c10d::AllgatherOptions& opts) override {
    return all_gather_single_coalesced(outs, ins, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single_coalesced(
      std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins,
      const c10d::ReduceScatterOptions& opts) override {
    return each(outs, ins, [&](at::Tensor& o, at::Tensor& i) {
      c10d::ReduceScatterOptions own = opts;
      return reduce_scatter_single(o, i, own);
    });
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins,
      const c10d::ReduceScatterOptions& opts) override {
    return reduce_scatter_single_coalesced(outs, ins, opts);
  }

  // A _coalescing_manager given a device brackets its calls with these (NCCL launches them as one
  // group). Here each call inside runs as it comes, enqueued in order as any op is: the bracket's
  // Work is done.
  void startCoalescing() override {}
  c10::intrusive_ptr<c10d::Work> endCoalescing() override { return done({}); }

  // The rest: the transport's methods.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& ts,
                                        const c10d::ReduceOptions& opts) override {
    return call("reduce", ts, opts);
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outs,
                                           std::vector<at::Tensor>& ins,
                                           const c10d::AllgatherOptions& opts) override {
    return call("allgather", outs, ins, opts);
  }
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outs,
                                                     std::vector<at::Tensor>& ins,
                                                     const c10d::AllgatherOptions& opts) override {
    return call("allgather_coalesced", outs, ins, opts);
  }
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outs,
                                        std::vector<at::Tensor>& ins,
                                        const c10d::GatherOptions& opts) override {
    return call("gather", outs, ins, opts);
  }
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outs,
                                         std::vector<std::vector<at::Tensor>>& ins,
                                         const c10d::ScatterOptions& opts) override {
    return call("scatter", outs, ins, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outs,
                                                std::vector<std::vector<at::Tensor>>& ins,
                                                const c10d::ReduceScatterOptions& opts) override {
    return call("reduce_scatter", outs, ins, opts);
  }
  c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& out, at::Tensor& in,
                                                   std::vector<int64_t>& out_splits,
                                                   std::vector<int64_t>& in_splits,
                                                   const c10d::AllToAllOptions& opts) override {
    return call("all_to_all_single", out, in, out_splits, in_splits, opts);
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& out, at::Tensor& in,
                                               std::vector<int64_t>& out_splits,
                                               std::vector<int64_t>& in_splits,
                                               const c10d::AllToAllOptions& opts) override {
    return call("all_to_all_single", out, in, out_splits, in_splits, opts);
  }
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outs,
                                          std::vector<at::Tensor>& ins,
                                          const c10d::AllToAllOptions& opts) override {
    return call("alltoall", outs, ins, opts);
  }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& ts, int dst, int tag) override {
    return call("send", ts, dst, tag);
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& ts, int src, int tag) override {
    return call("recv", ts, src, tag);
  }

 private:
  // The transport's method |name| on |args|, with the GIL: the Work it returns (a _Later, a call
  // that finishes later, as one).
  template <typename... Args>
  c10::intrusive_ptr<c10d::Work> call(const char* name, Args&&... args) {
    py::gil_scoped_acquire gil;
    py::object r = py_.attr(name)(std::forward<Args>(args)...);
    if (!py::isinstance<c10d::Work>(r)) return c10::make_intrusive<Later>(std::move(r));
    return r.cast<c10::intrusive_ptr<c10d::Work>>();
  }

  // AVG's last step on the host transport, where gloo summed: |h| divided by the group's size
  // (floored for integers, as NCCL's).
  void average(at::Tensor& h) {
    if (getSize() == 1) return;
    if (h.is_floating_point() || h.is_complex()) h.div_(getSize());
    else h.floor_divide_(getSize());
  }

  // A coalesced call: |one|(out, in) on each pair of |outs| and |ins| in turn.
  template <typename One>
  c10::intrusive_ptr<c10d::Work> each(std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins,
                                      One one) {
    TORCH_CHECK(outs.size() == ins.size(), "a coalesced collective of ", ins.size(),
                " inputs and ", outs.size(), " outputs");
    for (size_t k = 0; k < outs.size(); k++) one(outs[k], ins[k])->wait();
    return done(outs);
  }

  // CPU tensors sharing |ts|' memory (the CPU plugin's device memory is host memory), for gloo
  // to use with no copy; empty when one has none (then the transport's Python method copies).
  static std::vector<at::Tensor> aliases(const std::vector<at::Tensor>& ts) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : ts) {
      std::optional<at::Tensor> a = host_alias(t);
      if (!a) return {};
      out.push_back(*a);
    }
    return out;
  }

  // One collective of the host transport: |start|() starts gloo's call on the aliases, checked
  // on the board as the transport's _agree and _wait do (post the digest and go on; the last
  // rank to post raises before gloo, the others while they wait for it). The rare ends (a
  // mismatch, a rank gone, a late post) are the transport's Python.
  template <typename Start>
  void host(const char* name, const std::string& desc, Start start) {
    count("host", name);
    uint64_t seq = 0;
    if (board_) {
      seq = board_->post(call_digest(desc));
      int agreed = board_->state(seq, 0);
      if (agreed == 0) slow("_mismatch", desc);
      if (agreed == 1) seq = 0;  // checked: nothing to look at while gloo runs
    }
    c10::intrusive_ptr<c10d::Work> work = start();
    if (!seq) {
      work->wait();
      return;
    }
    for (;;) {
      try {
        work->wait(std::chrono::milliseconds(20));
        break;
      } catch (const std::exception&) {
        if (work->isCompleted()) {  // done since, or gloo's own error
          try {
            work->wait();
            break;
          } catch (const std::exception&) {  // a rank's exit, named, comes first
            slow("_raise_if_dead", seq);
            throw;
          }
        }
        if (board_->state(seq, 0) == 0) slow("_mismatch", desc);
        slow("_raise_if_dead", seq);
      }
    }
    int agreed = board_->state(seq, 0);
    if (agreed == 0) slow("_mismatch", desc);
    if (agreed < 0) slow("_settle_call", seq, desc);  // a rank that has not posted yet
  }

  // The transport's method |name| for a rare end of a checked call (it may raise).
  template <typename... Args>
  void slow(const char* name, Args&&... args) {
    py::gil_scoped_acquire gil;
    py_.attr(name)(std::forward<Args>(args)...);
  }

  void native(const char* name, const std::string& desc, const char* kind, const char* op,
              int root, const at::Tensor& in, const at::Tensor& out) {
    count("device", name);
    meeting_->run(getRank(), desc, kind, op, root, in, out, timeout_);
  }

  py::object py_;
  std::shared_ptr<Meeting> meeting_;  // the device transport's; null on the host transport
  double timeout_ = 0;
  c10::intrusive_ptr<c10d::Backend> gloo_;  // the host transport's, where it runs natively
  std::shared_ptr<Board> board_;            // its board, when it checks calls on one
};

}  // namespace

void register_collective(py::module& m) {
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
  m.def("host_alias", &host_alias, py::arg("tensor"),
        "A CPU tensor sharing a tpu tensor's memory where the device's memory is host memory "
        "(the CPU plugin), else None; valid until the tpu tensor is next written.");
  m.def("collective", &collective, py::arg("kind"), py::arg("op"), py::arg("root"),
        py::arg("inputs"), py::arg("outputs"),
        "Runs one collective over participants' tpu tensors, each on a device of its own.");
  m.def("backend", [](int rank, int size, py::object transport) {
          return c10::intrusive_ptr<c10d::Backend>(c10::make_intrusive<PjrtBackend>(rank, size, transport));
        }, py::arg("rank"), py::arg("size"), py::arg("transport"),
        "The pjrt c10d backend of one rank over |transport| (distributed.py's).");
  m.def("backend_transport", [](const c10::intrusive_ptr<c10d::Backend>& b) -> py::object {
          auto* p = dynamic_cast<PjrtBackend*>(b.get());
          return p ? p->transport() : py::none();
        }, py::arg("backend"), "A pjrt backend's transport object; None for another backend.");
  m.def("collective_counts", []() {
          std::lock_guard<std::mutex> lock(g_counts_mu);
          return g_counts;
        }, "The native collectives' calls: {transport: {collective: calls}}.");
  m.def("reset_collective_counts", []() {
          std::lock_guard<std::mutex> lock(g_counts_mu);
          g_counts.clear();
        });
  py::class_<Board, std::shared_ptr<Board>>(m, "Board",
      "A rank's side of the host transport's shared page where ranks post their calls' digests.")
      .def(py::init<py::buffer, int, int>(), py::arg("page"), py::arg("size"), py::arg("rank"))
      .def("post", &Board::post, py::arg("digest"), "Posts the next call's digest: its number.")
      .def("state", &Board::state, py::arg("seq"), py::arg("wait_ms") = 0,
           "Within wait_ms: 1 every rank posted call seq with one digest, 0 different, -1 not yet.");
  m.def("call_digest", &call_digest, py::arg("desc"), "A call's 56-bit digest, as ranks post it.");
}

}  // namespace tp_glue
