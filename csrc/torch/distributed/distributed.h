// What the c10d backend's files share. Distribution's glue is three files, one per concept:
// backend.cpp (the "pjrt" c10d class, its Work objects and its call counts), meeting.cpp (the
// device transport: the in-process ranks' rendezvous, one collective of every rank handed to
// exec/collective.h) and host.cpp (the host transport's protocol: a call's description and
// digest, the check of every call on the board (dist/board.h) or through gloo, the wait on gloo
// that watches the board, AVG's division, and aliases of device memory for gloo). The Python
// side (python/torch_pjrt/distributed/) creates these objects and hands them to the backend; no
// code here calls into Python but the transport's c10d methods, a Python action a rank brings to
// a meeting, and a later Work's is_completed()/wait(). See ../glue.h.
#ifndef TP_TORCH_DISTRIBUTED_H_
#define TP_TORCH_DISTRIBUTED_H_

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "torch/glue.h"

namespace tp_glue {

// The classes below hold Python objects and are bound with pybind11, whose types are hidden: so are
// they (as the glue's other classes are, in anonymous namespaces of one file).
#define TP_GLUE_HIDDEN __attribute__((visibility("hidden")))

// ---- counts (backend.cpp) ----

// Counts one call of collective |name| on |transport| ("device" or "host"): every collective,
// native or the transport's Python, is counted here.
void count_collective(const std::string& transport, const std::string& name);

// ---- the device transport (meeting.cpp) ----

// Where the ranks of one group of the device transport, threads of this process, meet for each
// collective, in call order: each rank brings its call's description and its part; the last to
// arrive checks that the descriptions agree and runs the call for all of them: a collective of
// the C executor, or a Python action given the ranks' parts. The ranks wait without the GIL.
// breaks() makes every waiting and later join raise.
class TP_GLUE_HIDDEN Meeting {
 public:
  explicit Meeting(int size);

  // A native collective: this rank's |input| -> |output| (|kind| empty: none, a barrier).
  // Called with or without the GIL; waits without it.
  void run(int rank, const std::string& desc, const std::string& kind, const std::string& op,
           int root, const at::Tensor& input, const at::Tensor& output, double timeout);

  // A Python action: action([every rank's payload]) run by the last rank; returns (True, its
  // result) or (False, the exception it raised), the same for every rank. With the GIL.
  py::tuple join_py(int rank, const std::string& desc, py::object payload, py::object action,
                    double timeout);

  void breaks(const std::string& why);

 private:
  struct Call;
  template <typename Put>
  std::shared_ptr<Call> join(int rank, const std::string& desc, double timeout,
                             std::string& abandoned, Put put);
  void execute(Call& c);
  static void finish(const std::shared_ptr<Call>& call, const std::string& abandoned);

  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> seq_;
  std::map<uint64_t, std::shared_ptr<Call>> calls_;
  std::string broken_;
};

// ---- the host transport (host.cpp) ----

// c10d's reduction by name: "SUM", ..., "PREMUL_SUM"; "?" for another.
const char* reduce_op_name(const c10d::ReduceOp& op);
// A call as ranks compare it: "all_reduce(float32[3, 4], SUM)"; |t| undefined: the name alone;
// |shape| false: the dtype without the shape; |op| null: no reduction. Both transports describe
// their calls with it; the host transport's digests are of these bytes.
std::string describe_call(const std::string& name, const at::Tensor& t, const char* op,
                          bool shape = true);
// AVG's last step on the host transport, where gloo summed: |h| divided in place by |size|
// (floored for integers, as NCCL's).
void average(at::Tensor& h, int size);
// A CPU tensor aliasing |t|'s device memory, for gloo to use with no copy: none when the device's
// memory is not host memory or |t| cannot be aliased (tp_eager_host_alias). Valid while nothing
// writes |t|; keeps |t|'s storage alive.
std::optional<at::Tensor> host_alias(const at::Tensor& t);

// One rank's side of the host transport's check that the ranks of its group run the same calls,
// and its gloo. On one host the ranks post each call's digest on the group's board (a shared page,
// dist/board.h) and do not wait for each other there: the last rank to post sees every post and
// raises before its gloo call; the others, whose gloo call then cannot finish, look at the board
// while they wait for it (wait()) and raise too. Waiting for each other first would line the ranks
// up before every gloo call (measured: twice the time of a 4 KiB all_gather, 2 ranks on 2 cores).
// Across hosts (or where the ranks cannot share a page), one MAX all_reduce of (digest, -digest)
// through gloo first. A mismatch raises on every rank, naming each rank's call.
class TP_GLUE_HIDDEN HostGroup {
 public:
  // Opens the board through |store| (every rank of the group calls it) when |check| and the
  // group has more than one rank.
  HostGroup(const c10::intrusive_ptr<c10d::Store>& store, c10::intrusive_ptr<c10d::Backend> gloo,
            int rank, int size, double timeout, bool check);
  ~HostGroup();

  const c10::intrusive_ptr<c10d::Backend>& gloo() const { return gloo_; }
  bool on_board() const { return page_ != nullptr; }

  // Checks that every rank is about to run the call |desc| (raises on a mismatch) or posts it to
  // be checked while gloo runs (wait()). Called with or without the GIL.
  void agree(const std::string& desc);
  // Waits for gloo's |work| of the call last agreed on, looking at the board meanwhile, and checks
  // the call after. Called with or without the GIL; waits without it.
  void wait(const c10::intrusive_ptr<c10d::Work>& work);

 private:
  uint64_t post(uint64_t digest);
  int state(uint64_t seq, int wait_ms);
  void settle_pending();
  bool settle(uint64_t seq);
  [[noreturn]] void mismatch(const std::string& desc);
  void raise_if_dead(uint64_t seq);
  void open_board(const c10::intrusive_ptr<c10d::Store>& store);

  c10::intrusive_ptr<c10d::Backend> gloo_;
  const int rank_, size_;
  const double timeout_;
  const bool check_;
  void* page_ = nullptr;      // the board; null: the check goes through gloo
  std::vector<int64_t> pids_; // the ranks' processes, for a rank that died
  std::mutex mu_;
  uint64_t seq_ = 0;          // the last call posted
  std::optional<std::pair<uint64_t, std::string>> pending_;  // posted, not checked yet
};

}  // namespace tp_glue

#endif  // TP_TORCH_DISTRIBUTED_H_
