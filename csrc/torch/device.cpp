// The device interface: errors and dtypes shared by the glue, the device state, the allocator,
// events over the in-order device queue, the device guard, the generator and the PrivateUse1
// hooks. See glue.h.
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "torch/glue.h"

namespace tp_glue {

// ---- errors ----

void throw_status(tp_status_t* st) {
  std::string msg = tp_status_message(st);
  tp_status_code_t code = tp_status_code(st);
  tp_status_free(st);
  if (code == TP_RESOURCE_EXHAUSTED)
    throw c10::OutOfMemoryError(c10::SourceLocation{__func__, __FILE__, __LINE__}, msg);
  // The exception types PyTorch's CPU kernels raise for the same mistakes.
  if (code == TP_UNIMPLEMENTED) TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
  if (code == TP_OUT_OF_RANGE) TORCH_CHECK_INDEX(false, msg);
  TORCH_CHECK(false, msg);
}

std::string g_init_error = "torch_pjrt was not imported";

tp_client_t* client() {
  tp_client_t* c = tp_exec_client();
  if (!c && tp_exec_forked()) throw_status(tp_exec_unavailable());
  TORCH_CHECK(c, "the tpu device is unavailable: ", g_init_error);
  return c;
}

// ---- dtypes and views ----

tp_dtype_t to_tp(c10::ScalarType t) {
  switch (t) {
    case c10::kBool: return TP_DTYPE_BOOL;
    case c10::kByte: return TP_DTYPE_U8;
    case c10::kChar: return TP_DTYPE_I8;
    case c10::kShort: return TP_DTYPE_I16;
    case c10::kInt: return TP_DTYPE_I32;
    case c10::kLong: return TP_DTYPE_I64;
    case c10::kHalf: return TP_DTYPE_F16;
    case c10::kBFloat16: return TP_DTYPE_BF16;
    case c10::kFloat: return TP_DTYPE_F32;
    case c10::kDouble: return TP_DTYPE_F64;
    case c10::kComplexFloat: return TP_DTYPE_C64;
    case c10::kComplexDouble: return TP_DTYPE_C128;
    default: return TP_DTYPE_INVALID;
  }
}

c10::ScalarType from_tp(tp_dtype_t t) {
  static const c10::ScalarType map[] = {c10::kBool, c10::kByte, c10::kChar, c10::kShort,
                                        c10::kInt,  c10::kLong, c10::kHalf, c10::kBFloat16,
                                        c10::kFloat, c10::kDouble, c10::kComplexFloat,
                                        c10::kComplexDouble};
  return map[t];
}

// Live storages by the start of their address range. A tensor that PyTorch wraps around a tpu
// address itself (at::from_blob: the legacy serializer writing a storage, which pickle uses)
// holds a DataPtr without our context, and is resolved through this map to the storage whose
// range holds the address.
namespace {
std::mutex g_live_lock;
std::map<uintptr_t, tp_storage_t*> g_live;

void note_live(tp_storage_t* s, bool live) {
  auto start = reinterpret_cast<uintptr_t>(tp_storage_addr(s));
  if (!start) return;
  std::lock_guard<std::mutex> g(g_live_lock);
  if (live)
    g_live[start] = s;
  else
    g_live.erase(start);
}

tp_storage_t* live_storage_at(const void* p, int64_t* out_shift) {
  auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> g(g_live_lock);
  auto it = g_live.upper_bound(a);
  if (it == g_live.begin()) return nullptr;
  --it;
  if (a - it->first >= tp_storage_nbytes(it->second)) return nullptr;
  *out_shift = static_cast<int64_t>(a - it->first);
  return it->second;
}
}  // namespace

tp_storage_t* storage_of(const at::Tensor& t, int64_t* out_byte_offset) {
  const c10::Storage& st = t.storage();
  int64_t shift = 0;
  auto* s = static_cast<tp_storage_t*>(st.data_ptr().get_context());
  if (!s && st.data() && t.is_privateuseone()) s = live_storage_at(st.data(), &shift);
  if (out_byte_offset) *out_byte_offset = shift + t.storage_offset() * static_cast<int64_t>(t.itemsize());
  return s;
}

bool make_view(const at::Tensor& t, tp_view_t* v) {
  tp_dtype_t dt = to_tp(t.scalar_type());
  if (dt == TP_DTYPE_INVALID || t.dim() > TP_MAX_DIMS) return false;
  int64_t byte_offset = 0;
  v->storage = storage_of(t, &byte_offset);
  if (!v->storage || byte_offset % static_cast<int64_t>(t.itemsize())) return false;
  v->dtype = dt;
  v->ndim = static_cast<int>(t.dim());
  for (int i = 0; i < v->ndim; i++) {
    v->sizes[i] = t.size(i);
    v->strides[i] = t.stride(i);
  }
  v->offset = byte_offset / static_cast<int64_t>(t.itemsize());
  return true;
}

tp_view_t view_or_throw(const at::Tensor& t, const char* what) {
  tp_view_t v;
  TORCH_CHECK_NOT_IMPLEMENTED(make_view(t, &v), what, ": tpu tensors of dtype ", t.scalar_type(),
                              " with ", t.dim(), " dims are not supported");
  return v;
}

// ---- device state ----

thread_local c10::DeviceIndex g_current_device = 0;

c10::DeviceIndex device_count() { return static_cast<c10::DeviceIndex>(tp_exec_device_count()); }

void check_device_index(c10::DeviceIndex d) {
  TORCH_CHECK(d >= 0 && d < device_count(), "tpu device index ", static_cast<int>(d),
              " is out of range: ", static_cast<int>(device_count()), " tpu device(s) available");
}

// ---- allocator ----

namespace {

// Cumulative allocation counts per device (the client keeps bytes in use and peaks).
constexpr int kMaxDevices = 128;
struct AllocCounts {
  std::atomic<int64_t> allocations{0}, frees{0}, allocated_bytes{0}, freed_bytes{0};
};
AllocCounts g_counts[kMaxDevices];

AllocCounts* counts_of(int device) {
  return device >= 0 && device < kMaxDevices ? &g_counts[device] : nullptr;
}

// Tells the profiler (profile_memory=True) that |delta| bytes at |ptr| on |device| were allocated
// (> 0) or freed, and what the device holds now.
void report_memory(void* ptr, int64_t delta, int device) {
  if (!c10::memoryProfilingEnabled()) return;
  auto in_use = static_cast<size_t>(tp_storage_bytes_in_use(client(), device));
  c10::reportMemoryUsageToProfiler(ptr, delta, in_use, in_use,
                                   c10::Device(DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)));
}

void release_storage(void* ctx) {
  auto* s = static_cast<tp_storage_t*>(ctx);
  int device = tp_storage_device(s);
  auto nbytes = static_cast<int64_t>(tp_storage_nbytes(s));
  void* addr = tp_storage_addr(s);
  if (AllocCounts* c = counts_of(device)) {
    c->frees++;
    c->freed_bytes += nbytes;
  }
  note_live(s, false);
  tp_storage_release(s);
  report_memory(addr, -nbytes, device);
}

// Storages are the device memory: no cache of ours sits between them and the device (on the CPU
// plugin, malloc keeps freed blocks: emptyCache returns them), reserved equals allocated, and a
// stream recorded on a block changes nothing (one in-order queue per device).
struct TpuAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex dev = g_current_device;
    tp_storage_t* s = nullptr;
    check(tp_storage_create(client(), dev, nbytes, &s));
    if (AllocCounts* c = counts_of(dev)) {
      c->allocations++;
      c->allocated_bytes += static_cast<int64_t>(nbytes);
    }
    note_live(s, true);
    report_memory(tp_storage_addr(s), static_cast<int64_t>(nbytes), dev);
    return {tp_storage_addr(s), s, &release_storage, c10::Device(DeviceType::PrivateUse1, dev)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "tpu memory cannot be copied by the host; use Tensor.copy_");
  }
  bool initialized() override { return tp_exec_client() != nullptr; }
  void emptyCache(c10::MempoolId_t) override {
    // Memory an in-flight program still holds is released when it completes: wait for that;
    // then the CPU plugin's freed buffers kept for reuse go back to the system.
    if (tp_exec_client()) check(tp_exec_synchronize());
    tp_client_release_cached_memory();
  }
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_device_index(device);
    using c10::CachingAllocator::StatType;
    c10::CachingDeviceAllocator::DeviceStats st;
    AllocCounts* c = counts_of(device);
    auto fill = [&](c10::CachingAllocator::StatArray& a, int64_t current, int64_t peak,
                    int64_t allocated, int64_t freed) {
      for (size_t t = 0; t < static_cast<size_t>(StatType::NUM_TYPES); t++) {
        // All memory is one pool: "all" and "large_pool" alike; "small_pool" stays empty.
        if (t == static_cast<size_t>(StatType::SMALL_POOL)) continue;
        a[t].current = current;
        a[t].peak = peak;
        a[t].allocated = allocated;
        a[t].freed = freed;
      }
    };
    int64_t in_use = tp_storage_bytes_in_use(client(), device);
    int64_t peak = tp_storage_peak_bytes(client(), device);
    int64_t n_alloc = c ? c->allocations.load() : 0, n_free = c ? c->frees.load() : 0;
    int64_t b_alloc = c ? c->allocated_bytes.load() : 0, b_free = c ? c->freed_bytes.load() : 0;
    for (auto* a : {&st.allocated_bytes, &st.reserved_bytes, &st.active_bytes, &st.requested_bytes})
      fill(*a, in_use, peak, b_alloc, b_free);
    for (auto* a : {&st.allocation, &st.segment, &st.active})
      fill(*a, n_alloc - n_free, n_alloc - n_free, n_alloc, n_free);
    st.num_device_alloc = n_alloc;
    st.num_device_free = n_free;
    return st;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_device_index(device);
    if (AllocCounts* c = counts_of(device)) {
      c->allocated_bytes = c->freed_bytes = 0;
      c->allocations -= c->frees.load();
      c->frees = 0;
    }
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    check_device_index(device);
    tp_storage_reset_peak(client(), device);
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    check_device_index(device);
    int64_t total = tp_client_memory_limit(client());
    int64_t used = tp_storage_bytes_in_use(client(), device);
    return {static_cast<size_t>(std::max<int64_t>(total - used, 0)), static_cast<size_t>(total)};
  }
};
TpuAllocator g_allocator;

// ---- pinned host memory ----

// A pinned block: page-aligned host memory, locked in RAM (mlock, where the process's limit
// allows) and registered with the plugin for direct transfers where it takes that, plus the
// non_blocking copies still reading it (freeing the block waits for them).
struct PinnedBlock {
  size_t size = 0;
  bool locked = false, mapped = false;
  std::vector<PJRT_Event*> reads;
};
std::mutex g_pinned_lock;
std::map<uintptr_t, PinnedBlock> g_pinned;  // by start address

void free_pinned(void* p) {
  PinnedBlock b;
  {
    std::lock_guard<std::mutex> g(g_pinned_lock);
    auto it = g_pinned.find(reinterpret_cast<uintptr_t>(p));
    if (it != g_pinned.end()) {
      b = std::move(it->second);
      g_pinned.erase(it);
    }
  }
  tp_client_t* c = tp_exec_client();
  for (PJRT_Event* e : b.reads)
    if (c) tp_status_free(tp_event_await(c, e));
  if (b.mapped && c) tp_client_dma_unmap(c, p);
  if (b.locked) munlock(p, b.size);
  free(p);
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    const size_t page = 4096, size = std::max<size_t>((nbytes + page - 1) / page * page, page);
    void* p = nullptr;
    if (posix_memalign(&p, page, size) != 0 || !p) throw c10::OutOfMemoryError(
        c10::SourceLocation{__func__, __FILE__, __LINE__},
        "out of host memory allocating " + std::to_string(nbytes) + " bytes of pinned memory");
    PinnedBlock b;
    b.size = size;
    b.locked = mlock(p, size) == 0;
    if (tp_client_t* c = tp_exec_client()) {
      tp_status_t* st = tp_client_dma_map(c, p, size, &b.mapped);
      if (st) {
        if (b.locked) munlock(p, size);
        free(p);
        throw_status(st);
      }
    }
    {
      std::lock_guard<std::mutex> g(g_pinned_lock);
      g_pinned[reinterpret_cast<uintptr_t>(p)] = std::move(b);
    }
    return {p, p, &free_pinned, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dst, const void* src, std::size_t n) const override {
    std::memcpy(dst, src, n);
  }
};
PinnedAllocator g_pinned_allocator;

// The pinned block holding |p|, or end(); caller holds g_pinned_lock.
std::map<uintptr_t, PinnedBlock>::iterator pinned_block(const void* p) {
  auto a = reinterpret_cast<uintptr_t>(p);
  auto it = g_pinned.upper_bound(a);
  if (it == g_pinned.begin()) return g_pinned.end();
  --it;
  return a < it->first + it->second.size ? it : g_pinned.end();
}

}  // namespace

bool is_pinned(const void* p) {
  std::lock_guard<std::mutex> g(g_pinned_lock);
  return pinned_block(p) != g_pinned.end();
}

bool note_pinned_read(const void* p, PJRT_Event* read) {
  PJRT_Event* oldest = nullptr;
  {
    std::lock_guard<std::mutex> g(g_pinned_lock);
    auto it = pinned_block(p);
    if (it == g_pinned.end()) return false;
    auto& reads = it->second.reads;
    reads.push_back(read);
    if (reads.size() > 16) {  // a block copied from every step: its old copies are long done
      oldest = reads.front();
      reads.erase(reads.begin());
    }
  }
  if (oldest) check(tp_event_await(client(), oldest));
  return true;
}

c10::Allocator& allocator() { return g_allocator; }

namespace {

// ---- events over the in-order device queue ----

struct Marker {
  tp_marker_t m;
};

// ---- device guard ----

// The stream each thread has made current, per device (0: the default stream).
c10::StreamId& current_stream_id(c10::DeviceIndex d) {
  thread_local c10::StreamId current[kMaxDevices] = {};
  static c10::StreamId none;
  return d >= 0 && d < kMaxDevices ? current[d] : (none = 0);
}

// A tpu device with an index: torch.Stream("tpu") names the current device.
c10::Device indexed(c10::Device d) {
  return d.has_index() ? d : c10::Device(DeviceType::PrivateUse1, g_current_device);
}

struct TpuGuard final : c10::impl::DeviceGuardImplInterface {
  DeviceType type() const override { return DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    if (d.index() >= 0) g_current_device = d.index();
    return old;
  }
  c10::Device getDevice() const override { return {DeviceType::PrivateUse1, g_current_device}; }
  void setDevice(c10::Device d) const override {
    check_device_index(d.index());
    g_current_device = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) g_current_device = d.index();
  }
  // Streams: every stream of a device names its one in-order queue, so work on any two is
  // ordered as enqueued. They are distinct objects (ids) all the same, so code that makes a
  // stream, makes it current and compares current_stream() with it sees what it did.
  c10::Stream getStream(c10::Device d) const override {
    d = indexed(d);
    return c10::Stream(c10::Stream::UNSAFE, d, current_stream_id(d.index()));
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    static std::atomic<c10::StreamId> next{1};
    return c10::Stream(c10::Stream::UNSAFE, indexed(d), next++);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return getNewStream(d, 0);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, indexed(d));
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Stream old = getStream(s.device());
    c10::Device d = indexed(s.device());
    if (d.index() < kMaxDevices) current_stream_id(d.index()) = s.id();
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }
  void record(void** event, const c10::Stream&, const c10::DeviceIndex,
              const c10::EventFlag) const override {
    if (!*event) *event = new Marker();
    check(tp_exec_end_region());
    tp_client_mark(client(), &static_cast<Marker*>(*event)->m);
  }
  void block(void*, const c10::Stream&) const override {
    // One in-order queue per device: work enqueued after this point already follows the event.
  }
  bool queryEvent(void* event) const override {
    return !event || tp_client_marker_done(client(), &static_cast<Marker*>(event)->m);
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<Marker*>(event);
  }
  void synchronizeEvent(void* event) const override {
    if (event) check(tp_client_marker_wait(client(), &static_cast<Marker*>(event)->m));
  }
  double elapsedTime(void* a, void* b, const c10::DeviceIndex) const override {
    TORCH_CHECK(a && b, "elapsed_time: both events must be recorded first");
    auto* ma = static_cast<Marker*>(a);
    auto* mb = static_cast<Marker*>(b);
    check(tp_client_marker_wait(client(), &mb->m));
    return (tp_client_marker_time(client(), &mb->m) - tp_client_marker_time(client(), &ma->m)) /
           1e6;
  }
  bool queryStream(const c10::Stream&) const override {
    tp_marker_t m;
    tp_client_mark(client(), &m);
    return tp_client_marker_done(client(), &m);
  }
  void synchronizeStream(const c10::Stream&) const override {
    client();
    check(tp_exec_synchronize());
  }
  void synchronizeDevice(const c10::DeviceIndex) const override {
    client();
    check(tp_exec_synchronize());
  }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuard);

// ---- generator ----

struct TpuGenerator final : c10::GeneratorImpl {
  explicit TpuGenerator(c10::DeviceIndex d)
      : c10::GeneratorImpl(c10::Device(DeviceType::PrivateUse1, d),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}
  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    seed_ = c10::detail::getNonDeterministicRandom();
    offset_ = 0;
    return seed_;
  }
  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.numel() == 16 && state.dtype() == at::kByte,
                "tpu RNG state must be a uint8 tensor of 16 bytes");
    const auto* p = static_cast<const uint64_t*>(state.data());
    seed_ = p[0];
    offset_ = p[1];
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    at::Tensor t = at::empty({16}, at::kByte);
    auto* p = t.data_ptr<uint8_t>();
    std::memcpy(p, &seed_, 8);
    std::memcpy(p + 8, &offset_, 8);
    return t.getIntrusivePtr();
  }
  TpuGenerator* clone_impl() const override {
    auto* g = new TpuGenerator(device().index());
    g->seed_ = seed_;
    g->offset_ = offset_;
    return g;
  }
  static c10::DeviceType device_type() { return DeviceType::PrivateUse1; }

 private:
  uint64_t seed_ = 67280421310721ull;
  uint64_t offset_ = 0;
};

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex d) {
  static std::vector<at::Generator> gens;
  static std::once_flag once;
  std::call_once(once, [] {
    c10::DeviceIndex n = std::max<c10::DeviceIndex>(device_count(), 1);
    for (c10::DeviceIndex i = 0; i < n; i++) {
      gens.push_back(at::make_generator<TpuGenerator>(i));
      gens.back().set_current_seed(c10::detail::getNonDeterministicRandom());
    }
  });
  if (d < 0) d = g_current_device;
  check_device_index(d);
  return gens[d];
}

// ---- hooks ----

namespace {

struct TpuHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex d) const override {
    check_device_index(d);
    g_current_device = d;
  }
  c10::DeviceIndex getCurrentDevice() const override { return g_current_device; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    c10::DeviceIndex old = g_current_device;
    g_current_device = d;
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    return exchangeDevice(d);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override {
    return default_generator(d);
  }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    return at::make_generator<TpuGenerator>(d < 0 ? g_current_device : d);
  }
  at::Device getDeviceFromPtr(void*) const override {
    return {DeviceType::PrivateUse1, g_current_device};
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t nbytes) const override {
    resize_storage(storage, nbytes);
  }
  bool isPinnedPtr(const void* p) const override { return is_pinned(p); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned_allocator; }
};

}  // namespace

// Tensor.record_stream: memory is not reused across streams (every stream is the device's one
// queue), so there is nothing to record.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", [](at::Tensor&, c10::Stream) {});
}

void install_device() {
  static std::once_flag once;
  std::call_once(once, [] {
    c10::SetAllocator(DeviceType::PrivateUse1, &g_allocator);
    at::RegisterPrivateUse1HooksInterface(new TpuHooks());
  });
}

int64_t next_random_key(const std::optional<at::Generator>& given, c10::DeviceIndex device) {
  at::Generator gen = given && given->defined() ? *given : default_generator(device);
  TORCH_CHECK(gen.device().type() == DeviceType::PrivateUse1,
              "Expected a 'tpu' device type for generator but found '", gen.device().type(), "'");
  std::lock_guard<std::mutex> lock(gen.mutex());
  uint64_t seed = gen.current_seed(), offset = gen.get_offset();
  gen.set_offset(offset + 1);
  return static_cast<int64_t>(seed * 6364136223846793005ull + offset * 1442695040888963407ull + 1);
}

}  // namespace tp_glue
