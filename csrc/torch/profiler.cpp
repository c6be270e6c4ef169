// torch.profiler on tpu: a Kineto activity profiler (PyTorch's PrivateUse1 profiler registry)
// that runs the device's trace (runtime/trace.h) while a profile records and turns its events
// into Kineto activities:
// - each executed program: a kernel span on its device's track ("programs" row), from when the
//   device could start it to its completion, linked to the op that launched it (so the op's
//   device time is its programs' time), with a "tpu::execute" span on the launching thread and a
//   flow arrow between the two;
// - host/device copies: memcpy spans on the device's "copies" row, with their bytes;
// - collectives: spans on the device's "collectives" row, with transport and bytes;
// - compiles, disk-cache loads and CPU fallbacks: spans on the calling thread ("tpu::compile",
//   "tpu::load", "tpu::fallback <op>"), with why and what in their arguments.
// Device-side activities come with the PrivateUse1 activity; the host-side ones (PyTorch counts
// runtime calls as CPU activity) with the CPU activity too. Without Kineto, ProfilerStubs time
// each op between two markers on the device's queue.
#define USE_KINETO 1  // the registry's header is compiled out without it; PyPI's torch has Kineto
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <unistd.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "torch/glue.h"

namespace tp_glue {
namespace {

using libkineto::ActivityType;
using libkineto::GenericTraceActivity;

// Rows of a device's track.
constexpr int64_t kProgramsRow = 0, kCopiesRow = 1, kCollectivesRow = 2;
// The trace puts device tracks below the host's (Kineto's convention for GPUs).
constexpr int64_t kDeviceSortBase = libkineto::kExceedMaxPid;

const char* kind_name(tp_trace_kind_t k) {
  switch (k) {
    case TP_TRACE_PROGRAM: return "program";
    case TP_TRACE_COMPILE: return "compile";
    case TP_TRACE_LOAD: return "load";
    case TP_TRACE_FALLBACK: return "fallback";
    case TP_TRACE_COPY: return "copy";
    case TP_TRACE_COLLECTIVE: return "collective";
  }
  return "?";
}

class Session final : public libkineto::IActivityProfilerSession {
 public:
  explicit Session(const std::set<ActivityType>& types)
      : device_side_(types.count(ActivityType::CONCURRENT_KERNEL) > 0),
        host_side_(types.count(ActivityType::PRIVATEUSE1_RUNTIME) > 0),
        buffer_(std::make_unique<libkineto::CpuTraceBuffer>()) {}

  void start() override {
    tp_trace_start();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    // The programs recorded finish before the trace is read (bounded: a hung device leaves them
    // open rather than the profiler).
    tp_trace_stop(30000);
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  void pushCorrelationId(uint64_t id) override { tp_trace_push_correlation(id); }
  void popCorrelationId() override { tp_trace_pop_correlation(); }

  std::vector<std::string> errors() override {
    std::vector<std::string> e;
    if (size_t n = tp_trace_dropped())
      e.push_back("tpu trace full: " + std::to_string(n) + " events dropped");
    return e;
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) { return nullptr; }, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked, int64_t, int64_t) override {
    std::set<int> devices;
    size_t n = tp_trace_count();
    for (size_t i = 0; i < n; i++) {
      const tp_trace_event_t* e = tp_trace_event(i);
      const libkineto::ITraceActivity* cpu_op =
          e->correlation ? linked(static_cast<int32_t>(e->correlation)) : nullptr;
      bool on_device = e->kind == TP_TRACE_PROGRAM || e->kind == TP_TRACE_COPY ||
                       e->kind == TP_TRACE_COLLECTIVE;
      if (on_device && device_side_ && e->device >= 0) {
        devices.insert(e->device);
        add_device_span(e, i, cpu_op);
      }
      if (host_side_) add_host_span(e, i, cpu_op);
    }
    for (auto& a : buffer_->activities) a->log(logger);
    for (int d : devices) {
      logger.handleDeviceInfo(device_info(d), 0);
      for (auto [row, name] : {std::pair{kProgramsRow, "programs"}, std::pair{kCopiesRow, "copies"},
                               std::pair{kCollectivesRow, "collectives"}})
        logger.handleResourceInfo({row, row, d, name}, 0);
    }
  }

  // One device's name on the trace (the others are logged by processTrace).
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return device_side_ ? std::make_unique<libkineto::DeviceInfo>(device_info(0)) : nullptr;
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

 private:
  static libkineto::DeviceInfo device_info(int d) {
    const char* kind = tp_exec_client() ? tp_client_device_kind(tp_exec_client(), d) : nullptr;
    return {d, kDeviceSortBase + d, "tpu:" + std::to_string(d),
            std::string("tpu ") + std::to_string(d) + (kind ? std::string(" (") + kind + ")" : "")};
  }

  GenericTraceActivity& add(ActivityType type, const std::string& name) {
    buffer_->emplace_activity(buffer_->span, type, name);
    return *buffer_->activities.back();
  }

  static void describe(GenericTraceActivity& a, const tp_trace_event_t* e) {
    // Numbers as typed values: the templated addMetadata formats with fmt, which torch's
    // libraries do not export.
    if (e->device >= 0) a.addTypedMetadata("tpu device", static_cast<int64_t>(e->device));
    if (e->bytes) a.addTypedMetadata("bytes", static_cast<int64_t>(e->bytes));
    if (e->detail[0]) a.addMetadataQuoted(std::string(kind_name(e->kind)), e->detail);
    if (e->kind == TP_TRACE_COMPILE || e->kind == TP_TRACE_LOAD)
      a.addMetadataQuoted("cache", e->kind == TP_TRACE_COMPILE ? "miss" : "disk hit");
  }

  void add_device_span(const tp_trace_event_t* e, size_t i,
                       const libkineto::ITraceActivity* cpu_op) {
    ActivityType type = e->kind == TP_TRACE_COPY ? ActivityType::GPU_MEMCPY
                                                 : ActivityType::CONCURRENT_KERNEL;
    std::string name = e->kind == TP_TRACE_COPY ? std::string("tpu copy ") + e->detail
                       : e->kind == TP_TRACE_COLLECTIVE ? std::string("tpu collective ") + e->name
                                                        : std::string(e->name);
    GenericTraceActivity& a = add(type, name);
    a.device = e->device;
    a.resource = e->kind == TP_TRACE_PROGRAM ? kProgramsRow
                 : e->kind == TP_TRACE_COPY  ? kCopiesRow
                                             : kCollectivesRow;
    a.startTime = e->kind == TP_TRACE_COLLECTIVE ? e->begin_ns : e->device_begin_ns;
    a.endTime = e->kind == TP_TRACE_PROGRAM ? tp_trace_done_ns(e) : e->end_ns;
    a.id = static_cast<int32_t>(i + 1);
    a.linked = cpu_op;
    describe(a, e);
    if (e->kind == TP_TRACE_PROGRAM) {  // the arrow from its launch (add_host_span)
      a.flow.id = static_cast<uint32_t>(i + 1);
      a.flow.type = libkineto::kLinkAsyncCpuGpu;
      a.flow.start = 0;
    }
  }

  void add_host_span(const tp_trace_event_t* e, size_t i, const libkineto::ITraceActivity* cpu_op) {
    std::string name;
    switch (e->kind) {
      case TP_TRACE_PROGRAM: name = "tpu::execute"; break;
      case TP_TRACE_COMPILE: name = "tpu::compile"; break;
      case TP_TRACE_LOAD: name = "tpu::load"; break;
      case TP_TRACE_FALLBACK: name = std::string("tpu::fallback ") + e->name; break;
      default: return;  // copies and collectives are device spans
    }
    GenericTraceActivity& a = add(ActivityType::PRIVATEUSE1_RUNTIME, name);
    a.device = static_cast<int32_t>(getpid());
    a.resource = e->thread;
    a.threadId = e->thread;
    a.startTime = e->begin_ns;
    a.endTime = e->end_ns > e->begin_ns ? e->end_ns : e->begin_ns;
    a.id = static_cast<int32_t>(i + 1);
    a.linked = cpu_op;
    if (e->kind == TP_TRACE_PROGRAM) {
      a.addMetadataQuoted("program", e->name);
      if (device_side_) {
        a.flow.id = static_cast<uint32_t>(i + 1);
        a.flow.type = libkineto::kLinkAsyncCpuGpu;
        a.flow.start = 1;
      }
    } else if (e->kind != TP_TRACE_FALLBACK) {
      a.addMetadataQuoted("what", e->name);
    }
    describe(a, e);
  }

  bool device_side_, host_side_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class Profiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return types_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& types, const libkineto::Config&) override {
    for (ActivityType t : types)
      if (types_.count(t)) return std::make_unique<Session>(types);
    return nullptr;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<ActivityType>& types, const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "tpu";
  std::set<ActivityType> types_ = {ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                   ActivityType::PRIVATEUSE1_RUNTIME};
};

REGISTER_PRIVATEUSE1_PROFILER(Profiler);

// The profiler without Kineto (torch.autograd.profiler.profile(use_device="tpu",
// use_kineto=False)): each op's device time is the time between markers recorded on the device's
// queue around it, as CUDA's uses events.
struct Stubs final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    if (device) *device = g_current_device;
    auto* m = new tp_marker_t;
    tp_client_mark(client(), m);
    *event = std::shared_ptr<void>(m, [](void* p) { delete static_cast<tp_marker_t*>(p); });
    if (cpu_ns) *cpu_ns = c10::getTime();
  }
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* a,
                const torch::profiler::impl::ProfilerVoidEventStub* b) const override {
    auto* ma = static_cast<const tp_marker_t*>(a->get());
    auto* mb = static_cast<const tp_marker_t*>(b->get());
    check(tp_client_marker_wait(client(), mb));
    return static_cast<float>(tp_client_marker_time(client(), mb) - tp_client_marker_time(client(), ma)) /
           1e3f;  // microseconds
  }
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    for (int d = 0; d < tp_exec_device_count(); d++) op(d);
  }
  void synchronize() const override {
    client();
    check(tp_exec_synchronize());
  }
};

struct RegisterStubs {
  RegisterStubs() {
    static Stubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} g_register_stubs;

}  // namespace
}  // namespace tp_glue
