// The "pjrt" c10d backend: a C++ c10d class over one of two transports, chosen per group by
// python/torch_pjrt/distributed/_backend.py, which hands it the transport's objects: the device
// transport's meeting (meeting.cpp) or the host transport's group (host.cpp, gloo and the check).
// It runs the common collectives itself and calls the transport's Python method of a collective's
// name for every other. Every call of either is counted here. See distributed.h.
#include <atomic>
#include <chrono>
#include <cstring>

#include "torch/distributed/distributed.h"

namespace tp_glue {
namespace {

// Calls per transport and collective, native or the transport's Python.
std::mutex g_counts_mu;
std::map<std::string, std::map<std::string, int64_t>> g_counts;

// c10d's reduction as the C executor names it; null for PREMUL_SUM (its factor is Python's).
const char* native_op(const c10d::ReduceOp& op) {
  const char* name = reduce_op_name(op);
  return op.op_ == c10d::ReduceOp::PREMUL_SUM || name[0] == '?' ? nullptr : name;
}

// A finished Work whose result is |tensors| (enqueued on the device: ordered before any later
// use, as an op's results are).
c10::intrusive_ptr<c10d::Work> done(const std::vector<at::Tensor>& tensors) {
  auto fut = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  fut->markCompleted(c10::IValue(tensors));
  return c10d::Work::create_from_future(fut);
}

// The Work of a transport's call that finishes later (distributed/_base.py's _Later: an async
// send or recv): done when its Python object says so, finished by its wait().
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

// The "pjrt" c10d backend. Its transport, a Python object (distributed/_device.py or _host.py),
// holds every collective; this C++ class runs the common collectives itself, where a Python
// backend took the GIL several times per call (the trampoline, the method, its Future), which
// ranks queue for on a loaded host. On the device transport (all_reduce, broadcast, all_gather
// and reduce_scatter into one tensor, barrier) a rank meets the others and returns without taking
// the GIL once (measured: a fifth of a 4-rank 1 MiB all_reduce on 2 cores, two fifths at 4 KiB).
// On the host transport (all_reduce, broadcast, all_gather and reduce_scatter into one tensor, on
// tensors gloo can alias) it checks the call (HostGroup) and runs gloo's (a 4 KiB all_gather of
// 2 ranks: from 1.3-1.6x gloo's time on CPU tensors to 1.1x). The coalesced forms are the plain
// ones in turn. Every other call is the transport's method of that name.
class PjrtBackend : public c10d::Backend {
 public:
  // |transport|: the Python object whose methods run the other collectives; |meeting| and
  // |timeout| the device transport's (null on the host transport), |host| the host transport's.
  PjrtBackend(int rank, int size, py::object transport, std::shared_ptr<Meeting> meeting,
              double timeout, std::shared_ptr<HostGroup> host)
      : Backend(rank, size), py_(std::move(transport)), meeting_(std::move(meeting)),
        timeout_(timeout), host_(std::move(host)) {
    TORCH_CHECK(!meeting_ != !host_, "pjrt backend: one transport, device or host");
    if (host_) gloo_ = host_->gloo();
  }

  ~PjrtBackend() override {
    if (!Py_IsInitialized()) {
      py_.release();  // the interpreter is gone: nothing to give back
      return;
    }
    py::gil_scoped_acquire gil;
    py_ = py::object();
    host_.reset();
    gloo_.reset();
  }

  const py::object& transport() const { return py_; }

  const std::string getBackendName() const override { return "pjrt"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& ts,
                                           const c10d::BroadcastOptions& opts) override {
    if (gloo_ && ts.size() == 1) {
      std::vector<at::Tensor> hosts = aliases(ts);
      if (!hosts.empty()) {
        host("broadcast", describe_call("broadcast", ts[0], nullptr), ts[0].nbytes(),
             [&] { return gloo_->broadcast(hosts, opts); });
        return done(ts);
      }
    }
    if (!meeting_ || ts.size() != 1) return call("broadcast", ts, opts);
    std::string name = "broadcast@" + std::to_string(opts.rootRank);
    native("broadcast", describe_call(name, ts[0], nullptr), "broadcast", "SUM", opts.rootRank, ts[0],
           ts[0]);
    return done(ts);
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& ts,
                                           const c10d::AllreduceOptions& opts) override {
    const char* op = native_op(opts.reduceOp);
    if (gloo_ && ts.size() == 1 && op) {
      std::vector<at::Tensor> hosts = aliases(ts);
      if (!hosts.empty()) {
        bool avg = opts.reduceOp == c10d::ReduceOp::AVG;  // gloo has none: SUM, then divide
        c10d::AllreduceOptions o = opts;
        if (avg) o.reduceOp = c10d::ReduceOp::SUM;
        host("allreduce", describe_call("all_reduce", ts[0], op), ts[0].nbytes(),
             [&] { return gloo_->allreduce(hosts, o); });
        if (avg) average(hosts[0], getSize());
        return done(ts);
      }
    }
    if (!meeting_ || ts.size() != 1 || !op) return call("allreduce", ts, opts);
    native("allreduce", describe_call("allreduce", ts[0], op), "all_reduce", op, 0, ts[0], ts[0]);
    return done(ts);
  }

  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& out, at::Tensor& in,
                                                   const c10d::AllgatherOptions& opts) override {
    if (gloo_) {
      std::vector<at::Tensor> hosts = aliases({in, out});
      if (!hosts.empty()) {
        host("all_gather_single", describe_call("all_gather_into_tensor", in, nullptr), in.nbytes(),
             [&] { return gloo_->_allgather_base(hosts[1], hosts[0], opts); });
        return done({out});
      }
    }
    if (!meeting_) return call("all_gather_single", out, in, opts);
    native("all_gather_single", describe_call("all_gather_single", in, nullptr), "all_gather", "SUM",
           0, in, out);
    return done({out});
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                 const c10d::AllgatherOptions& opts) override {
    return all_gather_single(out, in, opts);
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(
      at::Tensor& out, at::Tensor& in, const c10d::ReduceScatterOptions& opts) override {
    const char* op = native_op(opts.reduceOp);
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
        host("reduce_scatter_single", describe_call("reduce_scatter_tensor", in, op), in.nbytes(),
             [&] { return gloo_->allreduce(flat, o); });
        std::memcpy(hosts[1].data_ptr(), static_cast<char*>(flat[0].data_ptr()) + part * getRank(),
                    part);
        if (avg) average(hosts[1], getSize());
        return done({out});
      }
    }
    if (!meeting_ || !op) return call("reduce_scatter_single", out, in, opts);
    native("reduce_scatter_single", describe_call("reduce_scatter_single", in, op), "reduce_scatter",
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
    TracedScope traced(TP_TRACE_COLLECTIVE, g_current_device, name);
    tp_trace_detail(traced.event, "the transport's Python method, rank %d", getRank());
    py::gil_scoped_acquire gil;
    py::object r = py_.attr(name)(std::forward<Args>(args)...);
    if (!py::isinstance<c10d::Work>(r)) return c10::make_intrusive<Later>(std::move(r));
    return r.cast<c10::intrusive_ptr<c10d::Work>>();
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
  // as every call of the host transport is (HostGroup: post the call and go on; the last rank to
  // post raises before gloo, the others while they wait for it).
  template <typename Start>
  void host(const char* name, const std::string& desc, size_t bytes, Start start) {
    count_collective("host", name);
    TracedScope traced(TP_TRACE_COLLECTIVE, g_current_device, name);
    describe_traced(traced.event, "host", desc, bytes);
    host_->agree(desc);
    host_->wait(start());
  }

  void native(const char* name, const std::string& desc, const char* kind, const char* op,
              int root, const at::Tensor& in, const at::Tensor& out) {
    count_collective("device", name);
    TracedScope traced(TP_TRACE_COLLECTIVE, g_current_device, name);
    describe_traced(traced.event, "device", desc, in.defined() ? in.nbytes() : 0);  // barrier: none
    meeting_->run(getRank(), desc, kind, op, root, in, out, timeout_);
  }

  // Says in |traced| (a collective's event of the device's trace, or NULL) what it moves.
  void describe_traced(tp_trace_event_t* traced, const char* transport, const std::string& desc,
                       size_t bytes) {
    if (!traced) return;
    traced->bytes = static_cast<int64_t>(bytes);
    tp_trace_detail(traced, "%s transport, rank %d: %s", transport, getRank(), desc.c_str());
  }

  py::object py_;
  std::shared_ptr<Meeting> meeting_;  // the device transport's; null on the host transport
  double timeout_ = 0;
  std::shared_ptr<HostGroup> host_;         // the host transport's; null on the device transport
  c10::intrusive_ptr<c10d::Backend> gloo_;  // its gloo
};

}  // namespace

void count_collective(const std::string& transport, const std::string& name) {
  std::lock_guard<std::mutex> lock(g_counts_mu);
  g_counts[transport][name]++;
}

void register_meeting(py::module& m);  // meeting.cpp
void register_host(py::module& m);     // host.cpp

void register_distributed(py::module& m) {
  register_meeting(m);
  register_host(m);
  m.def("backend", [](int rank, int size, py::object transport, std::shared_ptr<Meeting> meeting,
                      double timeout, std::shared_ptr<HostGroup> host) {
          return c10::intrusive_ptr<c10d::Backend>(c10::make_intrusive<PjrtBackend>(
              rank, size, std::move(transport), std::move(meeting), timeout, std::move(host)));
        }, py::arg("rank"), py::arg("size"), py::arg("transport"), py::arg("meeting") = nullptr,
        py::arg("timeout") = 0.0, py::arg("host") = nullptr,
        "The pjrt c10d backend of one rank: the device transport's meeting (and its timeout) or "
        "the host transport's group; the transport's Python object runs every other call.");
  m.def("backend_transport", [](const c10::intrusive_ptr<c10d::Backend>& b) -> py::object {
          auto* p = dynamic_cast<PjrtBackend*>(b.get());
          return p ? p->transport() : py::none();
        }, py::arg("backend"), "A pjrt backend's transport object; None for another backend.");
  m.def("count_collective", &count_collective, py::arg("transport"), py::arg("name"),
        "Counts one call of a collective on a transport.");
  m.def("collective_counts", []() {
          std::lock_guard<std::mutex> lock(g_counts_mu);
          return g_counts;
        }, "The collectives' calls: {transport: {collective: calls}}.");
  m.def("reset_collective_counts", []() {
          std::lock_guard<std::mutex> lock(g_counts_mu);
          g_counts.clear();
        });
}

}  // namespace tp_glue
