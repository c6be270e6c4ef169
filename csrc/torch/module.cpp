// The Python module torch_pjrt._C: initialization, counters, reports and the device calls
// torch.tpu makes. See glue.h.
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include "torch/glue.h"

extern "C" {
#include "exec/bucket.h"
#include "exec/fused.h"
#include "hlo/module.h"
#include "runtime/executable.h"
}

namespace tp_glue {

void register_graph(py::module& m);       // graph.cpp
void register_distributed(py::module& m);  // distributed/backend.cpp

namespace {

void init(const std::string& plugin, const std::string& cache_dir, int64_t capacity,
          bool blocking) {
  char* warning = nullptr;
  check(tp_exec_init(plugin.c_str(), cache_dir.c_str(), static_cast<size_t>(capacity), &warning));
  if (warning) {
    TORCH_WARN("tpu: on-disk executable cache disabled: ", warning);
    free(warning);
  }
  tp_exec_set_blocking(blocking);
  install_device();
}

py::dict stats() {
  tp_runtime_stats_t s{};
  if (tp_exec_client()) tp_runtime_stats(tp_exec_client(), &s);
  py::dict d;
  d["compiles"] = s.compiles;
  d["memory_cache_hits"] = s.memory_cache_hits;
  d["disk_cache_hits"] = s.disk_cache_hits;
  d["executes"] = s.executes;
  d["compile_seconds"] = s.compile_seconds;
  d["compiles_new_shape"] = tp_exec_new_shape_compiles();
  d["compiles_bucketed"] = tp_bucket_compiles();
  d["bucketed_calls"] = tp_bucket_calls();
  py::dict fb;
  for (const auto& [name, n] : fallback_counts()) fb[py::str(name)] = n;
  d["fallbacks"] = fb;
  tp_fused_stats_t f{};
  tp_fused_stats(&f);
  d["fused_regions"] = f.regions;
  d["fused_ops"] = f.ops;
  d["fused_compiles"] = f.compiles;
  d["fused_cache_hits"] = f.hits;
  d["fused_max_ops"] = f.max_ops;
  d["fused_digest"] = f.digest;
  d["graph_runs"] = graph_runs();
  d["graph_compiles"] = graph_compiles();
  tp_exec_cache_t* c = tp_exec_cache();
  d["cached_executables"] = c ? tp_exec_cache_size(c) : 0;
  return d;
}

void reset_stats() {
  if (tp_exec_client()) tp_runtime_stats_reset(tp_exec_client());
  tp_exec_reset_new_shape_compiles();
  tp_bucket_reset_stats();
  tp_fused_reset_stats();
  reset_graph_stats();
  reset_fallback_counts();
}

py::list native_ops() {
  py::list l;
  for (int i = 0; i < tp_op_count; i++) {
    if (tp_op_table[i].flags & TP_OPF_GRAPH) continue;
    l.append(tp_op_table[i].name);
    if (tp_op_table[i].inplace) l.append(tp_op_table[i].inplace);
    if (tp_op_table[i].out) l.append(tp_op_table[i].out);
  }
  return l;
}

// A StableHLO module for torch_pjrt::call_module: registered (checked), its id.
int64_t register_module(const std::string& text) {
  int64_t id = -1;
  tp_status_t* st = tp_hlo_module_register(text.c_str(), &id);
  if (st && tp_status_code(st) == TP_INVALID_ARGUMENT) {
    std::string msg = tp_status_message(st);
    tp_status_free(st);
    throw py::value_error(msg);
  }
  check(st);
  return id;
}

// Module |id|'s @main: {"params": [(dtype name, sizes)], "results": [...]}.
py::dict module_signature(int64_t id) {
  const tp_hlo_module_t* m = tp_hlo_module_lookup(id);
  if (!m) throw py::key_error("no StableHLO module registered under " + std::to_string(id));
  auto types = [](const tp_hlo_type_t* t, int n) {
    py::list l;
    for (int i = 0; i < n; i++)
      l.append(py::make_tuple(tp_dtype_name(t[i].dtype),
                              std::vector<int64_t>(t[i].dims, t[i].dims + t[i].ndim)));
    return l;
  };
  py::dict d;
  d["params"] = types(m->sig.params, m->sig.n_params);
  d["results"] = types(m->sig.results, m->sig.n_results);
  return d;
}

py::dict plugin_info() {
  tp_client_t* c = client();
  py::dict d;
  int major, minor;
  tp_client_api_version(c, &major, &minor);
  d["platform"] = tp_client_platform_name(c);
  d["platform_version"] = tp_client_platform_version(c);
  d["plugin_path"] = tp_client_plugin_path(c);
  d["pjrt_api_version"] = py::make_tuple(major, minor);
  py::list devs;
  for (int i = 0; i < tp_client_device_count(c); i++) devs.append(tp_client_device_kind(c, i));
  d["devices"] = devs;
  d["cache_dir"] = tp_exec_cache_dir(tp_exec_cache());
  return d;
}

// The CPU fallback, called from a tpu kernel written in Python for the cases it does not compute
// (grid_sample's bicubic mode): counted, warned and refused in strict mode like any fallback.
py::object fallback(const std::string& name, const std::string& overload, const py::args& args,
                    const py::kwargs& kwargs) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
  torch::jit::Stack stack = torch::jit::createStackForSchema(op.schema(), args, kwargs, std::nullopt);
  {
    py::gil_scoped_release no_gil;
    cpu_fallback(op, &stack);
  }
  return torch::jit::createPyObjectForStack(std::move(stack));
}

}  // namespace
}  // namespace tp_glue

PYBIND11_MODULE(_C, m) {
  using namespace tp_glue;
  m.doc() = "torch_pjrt native core";
  m.def("init", &init, py::arg("plugin"), py::arg("cache_dir"), py::arg("cache_capacity"),
        py::arg("blocking"));
  m.def("initialized", [] { return tp_exec_initialized(); });
  m.def("in_bad_fork", [] { return tp_exec_forked(); });
  m.def("set_init_error", [](const std::string& e) { g_init_error = e; });
  m.def("stats", &stats);
  m.def("reset_stats", &reset_stats);
  m.def("native_ops", &native_ops);
  m.def("register_module", &register_module);
  m.def("module_signature", &module_signature);
  // The size a shape bucket rounds |n| up to (n itself when buckets are off, or n <= 1).
  m.def("bucket_size", [](int64_t n) { return tp_bucket_size(n); });
  m.def("bucket_enabled", [] { return tp_bucket_enabled(); });
  m.def("cpu_routed_ops", &cpu_routed_ops);
  m.def("graph_ops", [] {  // rows only whole graphs use (views, factories)
    py::list l;
    for (int i = 0; i < tp_op_count; i++)
      if (tp_op_table[i].flags & TP_OPF_GRAPH) l.append(tp_op_table[i].name);
    return l;
  });
  m.def("plugin_info", &plugin_info);
  m.def("set_strict", &set_strict);
  m.def("strict", &strict);
  m.def("set_fallback_warnings", &set_fallback_warnings);
  m.def("fallback", &fallback, py::arg("name"), py::arg("overload"));
  m.def("set_blocking", [](bool on) { tp_exec_set_blocking(on); });
  m.def("device_count", [] { return static_cast<int>(device_count()); });
  m.def("current_device", [] { return static_cast<int>(g_current_device); });
  m.def("set_device", [](int d) {
    check_device_index(static_cast<c10::DeviceIndex>(d));
    g_current_device = static_cast<c10::DeviceIndex>(d);
  });
  m.def("synchronize", [] {
    client();
    py::gil_scoped_release no_gil;
    check(tp_exec_synchronize());
  });
  m.def("set_fused", [](bool on) {
    py::gil_scoped_release no_gil;
    check(tp_fused_set(on));
  });
  m.def("fused", [] { return tp_fused_on(); });
  m.def("end_region", [] {
    py::gil_scoped_release no_gil;
    check(tp_exec_end_region());
  });
  m.def("set_fused_max_ops", [](int n) { tp_fused_set_max_ops(n); });
  m.def("device_name", [](int d) { return std::string(tp_client_device_kind(client(), d)); });
  m.def("memory_allocated", [](int d) { return tp_storage_bytes_in_use(client(), d); });
  m.def("max_memory_allocated", [](int d) { return tp_storage_peak_bytes(client(), d); });
  m.def("reset_peak_memory_stats", [](int d) { tp_storage_reset_peak(client(), d); });
  m.def("memory_limit", [] { return tp_client_memory_limit(client()); });
  m.def("set_memory_limit", [](int64_t b) { tp_client_set_memory_limit(client(), b); });
  m.def("device_memory_total", [] { return tp_client_memory_total(client()); });
  m.def("set_cache_capacity", [](int64_t n) {
    tp_exec_cache_set_capacity(tp_exec_cache(), static_cast<size_t>(n));
  });
  m.def("clear_cache", [] { tp_exec_cache_clear(tp_exec_cache()); });
  m.def("default_generator", [](int d) { return default_generator(static_cast<c10::DeviceIndex>(d)); });
  // Compiles MLIR text with the plugin and discards the result: lets tests and tools check how
  // a plugin error (its diagnostics) reaches Python.
  m.def("_compile", [](const std::string& mlir) {
    tp_executable_t* exe = nullptr;
    check(tp_executable_compile(client(), mlir.c_str(), mlir.size(), &exe));
    tp_executable_release(exe);
  });
  register_graph(m);
  register_distributed(m);
  m.def("storage_buffer_dtype", [](const at::Tensor& t) {
    tp_storage_t* s = storage_of(t);
    return s && tp_storage_buffer(s) ? std::string(tp_dtype_name(tp_storage_buffer_dtype(s)))
                                     : std::string();
  });
}
