// The host transport's protocol, written once: a call's description and digest, the check that
// the ranks of a group run the same call (on the board, dist/board.h, or through gloo), the wait
// on gloo's Work that watches the board meanwhile, the exchange of the calls when they differ,
// AVG's division, and CPU aliases of device memory for gloo. The backend's native collectives
// (backend.cpp) and the transport's Python (python/torch_pjrt/distributed/_host.py) both call
// it; neither has a copy. See distributed.h.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include "torch/distributed/distributed.h"

extern "C" {
#include "dist/board.h"
}

namespace tp_glue {
namespace {

// A call's digest as ranks post it: 56 bits of its description's FNV-1a hash.
uint64_t call_digest(const std::string& desc) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : desc) h = (h ^ c) * 1099511628211ull;
  return h & ((1ull << 56) - 1);
}

// Releases the GIL for its scope where the caller holds it (the backend's native calls come
// without it, the transport's Python with it).
struct NoGil {
  NoGil() {
    if (PyGILState_Check()) release.emplace();
  }
  std::optional<py::gil_scoped_release> release;
};

constexpr int kSliceMs = 100;                        // a settle's sleep between looks for the dead
constexpr std::chrono::milliseconds kWorkSlice{20};  // a checked gloo wait's, between looks

std::string mismatch_message(const std::vector<std::string>& calls) {
  std::string msg = "pjrt: the ranks of a process group called different collectives: ";
  for (size_t r = 0; r < calls.size(); r++)
    msg += (r ? "; rank " : "rank ") + std::to_string(r) + ": " + calls[r];
  return msg;
}

std::string store_get(const c10::intrusive_ptr<c10d::Store>& store, const std::string& key) {
  std::vector<uint8_t> v = store->get(key);
  return std::string(v.begin(), v.end());
}

}  // namespace

const char* reduce_op_name(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "?";
  }
}

std::string describe_call(const std::string& name, const at::Tensor& t, const char* op,
                          bool shape) {
  if (!t.defined()) return name;
  std::string d = name + "(" + std::string(c10::getDtypeNames(t.scalar_type()).first);
  if (shape) {
    d += "[";
    for (int64_t i = 0; i < t.dim(); i++) d += (i ? ", " : "") + std::to_string(t.size(i));
    d += "]";
  }
  return d + (op ? std::string(", ") + op : std::string()) + ")";
}

void average(at::Tensor& h, int size) {
  if (size == 1) return;
  if (h.is_floating_point() || h.is_complex()) h.div_(size);
  else h.floor_divide_(size);
}

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

HostGroup::HostGroup(const c10::intrusive_ptr<c10d::Store>& store,
                     c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size, double timeout,
                     bool check)
    : gloo_(std::move(gloo)), rank_(rank), size_(size), timeout_(timeout),
      check_(check && size > 1) {
  TORCH_CHECK(gloo_, "pjrt: the host transport needs a gloo backend");
  TORCH_CHECK(size > 0 && rank >= 0 && rank < size, "pjrt: rank ", rank, " of ", size);
  if (check_) open_board(store);
}

HostGroup::~HostGroup() { tp_board_unmap(page_, size_); }

// The board's file: rank 0 creates it and names it in the store with a token; each rank maps it
// and says whether it found the token, its process and where it runs. The ranks use it only if
// every one mapped it and all run in one PID namespace on one host (another host's /dev/shm holds
// another file; a pid of another namespace cannot be watched); rank 0 then unlinks the file:
// every rank has it mapped or gave up on it, nothing is left behind.
void HostGroup::open_board(const c10::intrusive_ptr<c10d::Store>& store) {
  std::string path, token;
  if (rank_ == 0) {
    std::random_device rd;
    char hex[TP_BOARD_TOKEN_BYTES + 1];
    std::snprintf(hex, sizeof(hex), "%08x%08x", rd(), rd());
    token = hex;
    char* made = nullptr;
    check(tp_board_create(size_, token.c_str(), &made));
    path = made;
    std::free(made);
    store->set("pjrt_board", path + "\n" + token);
  } else {
    std::string named = store_get(store, "pjrt_board");
    size_t nl = named.find('\n');
    path = named.substr(0, nl);
    token = nl == std::string::npos ? "" : named.substr(nl + 1);
  }
  void* page = nullptr;
  tp_board_map(path.c_str(), size_, token.c_str(), &page);
  char where[512];
  tp_board_whereami(where, sizeof(where));
  store->set("pjrt_board/" + std::to_string(rank_),
             std::string(page ? "1 " : "0 ") + std::to_string(getpid()) + " " + where);
  bool shared = true;
  std::vector<int64_t> pids;
  for (int r = 0; r < size_; r++) {
    std::string got = store_get(store, "pjrt_board/" + std::to_string(r));
    size_t a = got.find(' '), b = got.find(' ', a + 1);
    shared = shared && a != std::string::npos && b != std::string::npos && got[0] == '1' &&
             got.substr(b + 1) == where;
    pids.push_back(a == std::string::npos ? 0 : std::strtoll(got.c_str() + a + 1, nullptr, 10));
  }
  if (rank_ == 0) unlink(path.c_str());
  if (!shared) {
    tp_board_unmap(page, size_);
    return;
  }
  page_ = page;
  pids_ = std::move(pids);
}

uint64_t HostGroup::post(uint64_t digest) {
  std::lock_guard<std::mutex> lock(mu_);
  tp_board_post(page_, rank_, ++seq_, digest);
  return seq_;
}

int HostGroup::state(uint64_t seq, int wait_ms) {
  return tp_board_wait(page_, size_, seq, wait_ms);
}

void HostGroup::agree(const std::string& desc) {
  if (!check_) return;
  NoGil no_gil;
  if (pending_) settle_pending();  // a call that raised before its gloo wait: settle it first
  uint64_t digest = call_digest(desc);
  if (page_) {
    uint64_t seq = post(digest);
    int same = state(seq, 0);
    if (same == 0) mismatch(desc);
    if (same == 1) pending_.reset();  // checked: nothing to look at while gloo runs
    else pending_.emplace(seq, desc);
    return;
  }
  std::vector<at::Tensor> both{at::tensor({static_cast<int64_t>(digest),
                                           -static_cast<int64_t>(digest)}, at::kLong)};
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp::MAX;
  gloo_->allreduce(both, o)->wait();
  const int64_t* d = both[0].data_ptr<int64_t>();
  if (d[0] != -d[1]) mismatch(desc);
}

void HostGroup::wait(const c10::intrusive_ptr<c10d::Work>& work) {
  NoGil no_gil;
  if (!pending_) {
    work->wait();
    return;
  }
  uint64_t seq = pending_->first;
  for (;;) {
    try {
      work->wait(kWorkSlice);
      break;
    } catch (const std::exception&) {
      if (work->isCompleted()) {  // done since, or gloo's own error
        try {
          work->wait();
          break;
        } catch (const std::exception&) {  // a rank's exit, named, comes first
          raise_if_dead(seq);
          throw;
        }
      }
      if (state(seq, 0) == 0) {  // a rank called another collective: this gloo call never ends
        std::string desc = std::move(pending_->second);
        pending_.reset();
        mismatch(desc);
      }
      raise_if_dead(seq);
    }
  }
  settle_pending();
}

// Waits until every rank posted the pending call; raises if they differ.
void HostGroup::settle_pending() {
  auto [seq, desc] = std::move(*pending_);
  pending_.reset();
  if (!settle(seq)) mismatch(desc);
}

// Waits until every rank posted call |seq|: whether they posted one digest. Raises when a rank
// died or the group's timeout passed first.
bool HostGroup::settle(uint64_t seq) {
  NoGil no_gil;
  auto started = std::chrono::steady_clock::now();
  for (;;) {
    int same = state(seq, kSliceMs);
    if (same >= 0) return same == 1;
    raise_if_dead(seq);
    for (int r = 0; r < size_; r++) {
      if (tp_board_posted(page_, r, seq)) continue;
      double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (waited > timeout_) {
        char secs[32];
        std::snprintf(secs, sizeof(secs), "%.0f", timeout_);
        TORCH_CHECK(false, "pjrt: rank ", r, " did not reach the next collective within the "
                    "group's timeout (", secs, " s)");
      }
      break;
    }
  }
}

// Raises when a rank that has not posted call |seq| exited.
void HostGroup::raise_if_dead(uint64_t seq) {
  for (int r = 0; r < size_; r++)
    TORCH_CHECK(tp_board_posted(page_, r, seq) || tp_board_process_alive(pids_[r]), "pjrt: rank ",
                r, " of the process group exited before its next collective");
}

// Raises the mismatch of this rank's call |desc|, naming every rank's call, exchanged on the
// board (the group's gloo may be stuck in a call a rank never joined: each rank writes its own,
// then posts one more call, the group being broken anyway, to say it did) or through gloo.
void HostGroup::mismatch(const std::string& desc) {
  NoGil no_gil;
  std::vector<std::string> calls(size_);
  if (page_) {
    tp_board_write_desc(page_, size_, rank_, desc.c_str());
    settle(post(0));
    char got[TP_BOARD_DESC_BYTES + 1];
    for (int r = 0; r < size_; r++) {
      tp_board_read_desc(page_, size_, r, got);
      calls[r] = got;
    }
  } else {
    std::vector<at::Tensor> mine{at::zeros({TP_BOARD_DESC_BYTES}, at::kByte)};
    std::memcpy(mine[0].data_ptr(), desc.data(), std::min<size_t>(desc.size(), TP_BOARD_DESC_BYTES));
    std::vector<std::vector<at::Tensor>> all(1);
    for (int r = 0; r < size_; r++) all[0].push_back(at::empty({TP_BOARD_DESC_BYTES}, at::kByte));
    gloo_->allgather(all, mine)->wait();
    for (int r = 0; r < size_; r++) {
      const char* p = static_cast<const char*>(all[0][r].data_ptr());
      calls[r] = std::string(p, strnlen(p, TP_BOARD_DESC_BYTES));
    }
  }
  C10_THROW_ERROR(Error, mismatch_message(calls));
}

void register_host(py::module& m) {
  m.def("host_alias", &host_alias, py::arg("tensor"),
        "A CPU tensor sharing a tpu tensor's memory where the device's memory is host memory "
        "(the CPU plugin), else None; valid until the tpu tensor is next written.");
  m.def("describe_call", [](const std::string& name, const std::optional<at::Tensor>& t,
                            const std::optional<c10d::ReduceOp>& op, bool shape) {
          return describe_call(name, t ? *t : at::Tensor(), op ? reduce_op_name(*op) : nullptr,
                               shape);
        }, py::arg("name"), py::arg("tensor") = py::none(), py::arg("op") = py::none(),
        py::arg("shape") = true,
        "A call as ranks compare it: \"all_reduce(float32[3, 4], SUM)\".");
  m.def("reduce_op_name", [](const c10d::ReduceOp& op) { return std::string(reduce_op_name(op)); },
        py::arg("op"), "c10d's reduction by name: \"SUM\", ..., \"PREMUL_SUM\"; \"?\" for another.");
  m.def("average", [](at::Tensor h, int size) { average(h, size); }, py::arg("tensor"),
        py::arg("size"), "AVG's last step where gloo summed: divided in place by the group size.");
  py::class_<HostGroup, std::shared_ptr<HostGroup>>(m, "HostGroup",
      "A rank's side of the host transport's check that the ranks run the same calls, and its "
      "gloo.")
      .def(py::init<const c10::intrusive_ptr<c10d::Store>&, c10::intrusive_ptr<c10d::Backend>,
                    int, int, double, bool>(),
           py::arg("store"), py::arg("gloo"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("check"),
           // The ranks meet in the store: ranks as threads wait for each other there.
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("on_board", &HostGroup::on_board,
                             "Whether the ranks check their calls on a shared page.")
      .def("agree", &HostGroup::agree, py::arg("desc"),
           "Checks that every rank is about to run the call desc, or posts it to be checked "
           "while gloo runs (wait); raises on every rank, naming each rank's call, when not.")
      .def("wait", &HostGroup::wait, py::arg("work"),
           "Waits for gloo's work of the call last agreed on, and checks that call.");
}

}  // namespace tp_glue
