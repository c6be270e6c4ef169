// The graph object of the torch.compile backend: Python names a graph's values with meta
// tensors, adds ATen nodes (described as the table kernel describes a call) and runs the graph on
// tpu tensors as one program. See glue.h.
#include <ATen/record_function.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <unordered_map>

#include "torch/glue.h"

extern "C" {
#include "exec/graph.h"
}

namespace tp_glue {

// ---- whole graphs (the torch.compile backend) ----

std::atomic<int64_t> g_graph_runs{0}, g_graph_compiles{0};

// A graph whose program could not be built or compiled (torch_pjrt._C.GraphBuildError, a
// RuntimeError): the compile backend then runs that partition's nodes one by one.
struct GraphBuildError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int64_t graph_runs() { return g_graph_runs.load(); }
int64_t graph_compiles() { return g_graph_compiles.load(); }
void reset_graph_stats() {
  g_graph_runs = 0;
  g_graph_compiles = 0;
}

// An ATen call (an OpOverload and its Python arguments) described for the op table: its row and
// arguments, each tensor argument's tensor beside it.
struct Described {
  int op = -1;
  tp_eager_arg_t eargs[TP_MAX_ARGS];
  at::Tensor tensors[TP_MAX_ARGS];
  int ne = 0;
  std::unordered_map<const c10::TensorImpl*, const c10::TensorImpl*> stood_for;  // stand-in -> given
};

// Describes the call into |c|; nullptr, or why it has no native description. Tensor arguments
// must be meta tensors (a graph's values) unless |stand_in|: each is then replaced by a meta
// tensor of its dtype and sizes (a FakeTensor of a graph being traced), made below any Python
// dispatch mode, which would otherwise record it.
static const char* describe(const py::object& op, const py::args& args, const py::kwargs& kwargs,
                            Described& c, bool stand_in = false) {
  const c10::FunctionSchema& schema = py::cast<const c10::FunctionSchema&>(op.attr("_schema"));
  const std::string& full = schema.name();
  // Table rows name aten ops without their namespace, others with it.
  bool aten = full.rfind("aten::", 0) == 0;
  if (!aten && full.rfind("_c10d_functional::", 0) != 0 && full.rfind("torch_pjrt::", 0) != 0)
    return "not an aten op";
  std::string name = aten ? full.substr(6) : full;
  if (!schema.overload_name().empty()) name += "." + schema.overload_name();
  tp_op_variant_t variant = TP_VARIANT_FUNCTIONAL;
  c.op = tp_op_lookup(name.c_str(), &variant);
  if (c.op < 0 || variant != TP_VARIANT_FUNCTIONAL) return "no native lowering";
  // A Python number where the schema wants a Tensor (add.Tensor(x, 1) in a traced graph) is a
  // wrapped number, as the eager dispatcher makes it.
  py::list fixed;
  for (size_t i = 0; i < args.size(); i++) {
    py::handle a = args[i];
    bool want_tensor = i < schema.arguments().size() &&
                       schema.arguments()[i].type()->kind() == c10::TypeKind::TensorType;
    if (want_tensor && (py::isinstance<py::bool_>(a) || py::isinstance<py::int_>(a) ||
                        py::isinstance<py::float_>(a))) {
      c10::Scalar sc = py::isinstance<py::bool_>(a)  ? c10::Scalar(a.cast<bool>())
                       : py::isinstance<py::int_>(a) ? c10::Scalar(a.cast<int64_t>())
                                                     : c10::Scalar(a.cast<double>());
      at::Tensor t = c10::scalar_to_tensor(sc);
      t.unsafeGetTensorImpl()->set_wrapped_number(true);
      fixed.append(py::cast(t));
    } else {
      fixed.append(a);
    }
  }
  torch::jit::Stack stack = torch::jit::createStackForSchema(
      schema, py::tuple(fixed), kwargs, std::nullopt);
  if (stand_in) {
    c10::impl::ExcludeDispatchKeyGuard no_modes(
        c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
    auto meta = [&c](const at::Tensor& t) {
      if (!t.defined() || t.unsafeGetTensorImpl()->is_wrapped_number()) return t;
      at::Tensor m = at::empty(t.sizes(), at::TensorOptions().dtype(t.scalar_type()).device(at::kMeta));
      c.stood_for[m.unsafeGetTensorImpl()] = t.unsafeGetTensorImpl();
      return m;
    };
    for (c10::IValue& v : stack) {
      if (v.isTensor()) {
        v = meta(v.toTensor());
      } else if (v.isTensorList()) {
        std::vector<at::Tensor> l;
        for (const at::Tensor& t : v.toTensorList()) l.push_back(meta(t));
        v = l;
      } else if (v.isOptionalTensorList()) {
        c10::List<std::optional<at::Tensor>> l;
        for (const std::optional<at::Tensor> t : v.toOptionalTensorList())
          l.push_back(t ? std::optional<at::Tensor>(meta(*t)) : std::nullopt);
        v = l;
      }
    }
  }
  std::optional<at::Generator> generator;
  if (!convert_call(arg_roles(schema), stack, stack.size(), true, c.eargs, c.tensors, &c.ne,
                    &generator))
    return "arguments not describable natively";
  if (generator) return "an explicit generator";
  return nullptr;
}

// The shape buckets' rule (ops/op.h: tp_op_pad_rule) for a call of |op| on |args| (FakeTensors at
// a bucket's sizes) whose tensors |padded| ((tensor, mask): a bit per padded dim) are padded: per
// entry of |padded|, what its padding must read as (None: anything; "zero", "one", "lowest",
// "highest"; an int: that value), and whether the call needs its live sizes. None: the call
// cannot run padded so; False: the table has no row for it (or cannot describe the call).
static py::object pad_rule(const py::object& op, const py::list& padded, const py::args& args,
                           const py::kwargs& kwargs) {
  Described c;
  if (describe(op, args, kwargs, c, true)) return py::bool_(false);
  std::unordered_map<const c10::TensorImpl*, uint32_t> mask_of;
  std::vector<const c10::TensorImpl*> order;
  for (py::handle e : padded) {
    auto pair = e.cast<py::tuple>();
    const c10::TensorImpl* t = pair[0].cast<at::Tensor>().unsafeGetTensorImpl();
    mask_of[t] |= pair[1].cast<uint32_t>();
    order.push_back(t);
  }
  uint32_t bits[TP_MAX_ARGS] = {0};
  const c10::TensorImpl* given[TP_MAX_ARGS] = {nullptr};
  tp_op_arg_t a[TP_MAX_ARGS];
  for (int i = 0; i < c.ne; i++) {
    a[i] = c.eargs[i].arg;
    if (a[i].kind != TP_ARG_TENSOR) continue;
    auto it = c.stood_for.find(c.tensors[i].unsafeGetTensorImpl());
    given[i] = it == c.stood_for.end() ? nullptr : it->second;
    auto m = mask_of.find(given[i]);
    bits[i] = m == mask_of.end() ? 0 : m->second;
  }
  tp_pad_rule_t rule;
  if (!tp_op_pad_rule(&tp_op_table[c.op], a, c.ne, bits, &rule)) return py::none();
  static const char* const kNames[] = {nullptr, nullptr, "zero", "one", "lowest", "highest"};
  py::list fills;
  for (const c10::TensorImpl* t : order) {
    py::object fill = py::none();
    bool seen = false;
    for (int i = 0; i < c.ne; i++) {
      if (given[i] != t || !bits[i]) continue;
      py::object f = rule.fill[i] == TP_PAD_VALUE ? py::object(py::int_(rule.value[i]))
                     : kNames[rule.fill[i]]      ? py::object(py::str(kNames[rule.fill[i]]))
                                                 : py::object(py::none());
      // One tensor at two places that want its padding read unlike: it can't be both.
      if (seen && !f.equal(fill)) return py::none();
      fill = f;
      seen = true;
    }
    fills.append(fill);
  }
  return py::make_tuple(fills, py::bool_(rule.live));
}

// A graph under construction and its runs. Python names values with meta tensors: each graph
// input and node output is one, and passing it back as an argument refers to that value.
struct Graph {
  tp_graph_t* g = nullptr;
  std::unordered_map<const c10::TensorImpl*, int> ids;
  std::vector<at::Tensor> values;  // keeps the naming tensors alive
  std::vector<int> outputs;
  // Per value, the layout PyTorch gives it in eager (the traced strides): whether it is
  // contiguous, and channels-last. An emitter's choice of form reads them as in eager (a
  // transposed weight's matmul, a channels-last convolution); a value not set is contiguous.
  std::unordered_map<int, tp_op_arg_t> layout;  // only its two layout flags are set
  std::string name = "tpu::graph";  // what the profiler calls a run (set_name)

  Graph() { check(tp_graph_create(&g)); }

  void set_name(const std::string& n) {
    name = n;
    tp_graph_set_name(g, n.c_str());
  }
  ~Graph() { tp_graph_free(g); }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  at::Tensor name_value(int v) {
    const tp_meta_t* m = tp_graph_value_meta(g, v);
    TORCH_CHECK(m, "graph: bad value");
    at::Tensor t = at::empty(c10::IntArrayRef(m->sizes, m->ndim),
                             at::TensorOptions().dtype(from_tp(m->dtype)).device(at::kMeta));
    ids[t.unsafeGetTensorImpl()] = v;
    values.push_back(t);
    return t;
  }

  at::Tensor input(c10::ScalarType dtype, std::vector<int64_t> sizes) {
    tp_meta_t m{};
    m.dtype = to_tp(dtype);
    TORCH_CHECK_NOT_IMPLEMENTED(m.dtype != TP_DTYPE_INVALID && sizes.size() <= TP_MAX_DIMS,
                                "graph input of dtype ", dtype, " and ", sizes.size(), " dims");
    m.ndim = static_cast<int>(sizes.size());
    std::copy(sizes.begin(), sizes.end(), m.sizes);
    int v = tp_graph_input(g, &m);
    TORCH_CHECK(v >= 0, "graph: out of host memory");
    return name_value(v);
  }

  // Adds a call of ATen op |op| (an OpOverload); returns the meta tensors of its outputs, or the
  // reason it has no native lowering (a str): the caller then runs it eagerly.
  py::object node(const py::object& op, const py::args& args, const py::kwargs& kwargs) {
    Described c;
    if (const char* why = describe(op, args, kwargs, c)) return py::str(why);
    tp_op_arg_t a[TP_MAX_ARGS];
    int vals[TP_MAX_ARGS];
    const int ne = c.ne, opi = c.op;
    for (int i = 0; i < ne; i++) {
      a[i] = c.eargs[i].arg;
      vals[i] = -1;
      if (a[i].kind != TP_ARG_TENSOR) continue;
      auto it = ids.find(c.tensors[i].unsafeGetTensorImpl());
      if (it == ids.end()) return py::str("a tensor argument that is not a graph value");
      vals[i] = it->second;
      auto l = layout.find(vals[i]);
      if (l != layout.end()) a[i].contiguous = l->second.contiguous, a[i].channels_last = l->second.channels_last;
    }
    tp_meta_t metas[TP_MAX_OUTS];
    int n_out = 0, first = 0;
    tp_status_t* st = tp_graph_node(g, opi, a, vals, ne, metas, &n_out, &first);
    if (st) {
      std::string msg = tp_status_message(st);
      tp_status_free(st);
      return py::str(msg);
    }
    py::list outs;
    for (int k = 0; k < n_out; k++) outs.append(name_value(first + k));
    return outs;
  }

  // Records the strides value |t| has in eager (set_strides of the Python object).
  void set_strides(const at::Tensor& t, const std::vector<int64_t>& strides) {
    auto it = ids.find(t.unsafeGetTensorImpl());
    TORCH_CHECK(it != ids.end() && strides.size() == static_cast<size_t>(t.dim()),
                "graph: set_strides of a value not of this graph");
    layout_flags(at::empty_strided(t.sizes(), strides, t.options()), &layout[it->second]);
  }

  void set_outputs(const std::vector<at::Tensor>& outs) {
    outputs.clear();
    for (const at::Tensor& t : outs) {
      auto it = ids.find(t.unsafeGetTensorImpl());
      TORCH_CHECK(it != ids.end(), "graph output is not a value of this graph");
      outputs.push_back(it->second);
    }
    check(tp_graph_set_outputs(g, outputs.data(), static_cast<int>(outputs.size())));
  }

  // One participant's side of a run: views of its inputs, its generator keys and the storages
  // its outputs go to.
  struct Side {
    std::vector<tp_view_t> views;
    std::vector<at::Tensor> resolved;  // inputs read through their value (see prepare)
    std::vector<int64_t> keys;
    std::vector<std::optional<at::Tensor>> outs;
    std::vector<tp_storage_t*> out_storages;
  };

  // |into|: per output, None or a tensor to receive it in place (a mutated graph input: its
  // storage takes the result's buffer, no copy). A usable |into| tensor is dense, of the output's
  // dtype and shape, and the whole of its storage; for it the returned entry is None, else the
  // caller gets a fresh tensor to copy from.
  void prepare(const std::vector<at::Tensor>& inputs,
               const std::vector<std::optional<at::Tensor>>& into, c10::DeviceIndex device,
               Side& side) {
    TORCH_CHECK(into.empty() || into.size() == outputs.size(), "graph: expected ",
                outputs.size(), " output targets, got ", into.size());
    TORCH_CHECK(static_cast<int>(inputs.size()) == tp_graph_input_count(g), "graph: expected ",
                tp_graph_input_count(g), " inputs, got ", inputs.size());
    side.views.resize(inputs.size() + 1);
    // An input with a lazy conjugate or negative bit (the output of _conj or _neg_view in an
    // eager split) is read through its value, which its storage does not hold: resolved first.
    side.resolved.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); i++) {
      TORCH_CHECK(inputs[i].device().type() == DeviceType::PrivateUse1,
                  "graph input ", i, " is on ", inputs[i].device(), ", expected a tpu tensor");
      const at::Tensor* t = &inputs[i];
      if (t->is_conj() || t->is_neg()) {
        side.resolved.push_back(t->resolve_conj().resolve_neg());
        t = &side.resolved.back();
      }
      side.views[i] = view_or_throw(*t, "graph input");
    }
    c10::Device dev(DeviceType::PrivateUse1, device);
    side.keys.resize(tp_graph_random_count(g) + 1);
    for (int r = 0; r < tp_graph_random_count(g); r++)
      side.keys[r] = next_random_key(std::nullopt, device);
    c10::DeviceGuard guard(dev);
    for (size_t k = 0; k < outputs.size(); k++) {
      const tp_meta_t* m = tp_graph_value_meta(g, outputs[k]);
      c10::IntArrayRef shape(m->sizes, m->ndim);
      if (!into.empty() && into[k] && into[k]->defined()) {
        const at::Tensor& t = *into[k];
        if (t.device() == dev && to_tp(t.scalar_type()) == m->dtype && t.sizes() == shape &&
            t.is_contiguous() && t.storage_offset() == 0 &&
            t.storage().nbytes() == static_cast<size_t>(t.numel()) * t.element_size()) {
          side.out_storages.push_back(storage_of(t));
          side.outs.emplace_back(std::nullopt);
          continue;
        }
      }
      side.outs.emplace_back(at::empty(shape, at::TensorOptions().dtype(from_tp(m->dtype)).device(dev)));
      side.out_storages.push_back(storage_of(*side.outs.back()));
    }
  }

  // Runs the program over |sides| (one replica each on |devices| when more than one).
  void execute(std::vector<Side>& sides, const std::vector<int>& devices) {
    size_t n = sides.size(), n_in = static_cast<size_t>(tp_graph_input_count(g));
    size_t n_keys = static_cast<size_t>(tp_graph_random_count(g));
    std::vector<tp_view_t> views(n * n_in + 1);
    std::vector<int64_t> keys(n * n_keys + 1);
    std::vector<tp_storage_t*> outs(n * outputs.size() + 1);
    for (size_t r = 0; r < n; r++) {
      std::copy_n(sides[r].views.begin(), n_in, views.begin() + r * n_in);
      std::copy_n(sides[r].keys.begin(), n_keys, keys.begin() + r * n_keys);
      std::copy_n(sides[r].out_storages.begin(), outputs.size(), outs.begin() + r * outputs.size());
    }
    tp_graph_outcome_t outcome;
    tp_status_t* st;
    {
      py::gil_scoped_release no_gil;
      st = tp_graph_run_replicated(g, static_cast<int>(n), devices.data(), views.data(),
                                   keys.data(), outs.data(), &outcome);
    }
    if (st && outcome.build_failed) {
      std::string msg = tp_status_message(st);
      tp_status_free(st);
      throw GraphBuildError(msg);
    }
    check(st);
    g_graph_runs++;
    if (outcome.compiled) g_graph_compiles++;
  }

  // Runs on tpu tensors (views allowed); returns fresh dense outputs (see prepare for |into|).
  std::vector<std::optional<at::Tensor>> run(const std::vector<at::Tensor>& inputs,
                                             const std::vector<std::optional<at::Tensor>>& into) {
    // The run as an op of its own in the profiler: the graph's program is its device time, its
    // outputs its memory.
    RECORD_FUNCTION(name.c_str(), c10::ArrayRef<const c10::IValue>{});
    c10::DeviceIndex device = inputs.empty() ? g_current_device : inputs[0].device().index();
    std::vector<Side> sides(1);
    prepare(inputs, into, device, sides[0]);
    execute(sides, {static_cast<int>(device)});
    return std::move(sides[0].outs);
  }

  // The graph as one replicated program: participant r's |inputs[r]| on tpu:|devices[r]|; its
  // collectives run across the participants. Returns each participant's outputs as run() does.
  std::vector<std::vector<std::optional<at::Tensor>>> run_replicated(
      const std::vector<std::vector<at::Tensor>>& inputs, const std::vector<int>& devices,
      const std::vector<std::vector<std::optional<at::Tensor>>>& into) {
    TORCH_CHECK(!inputs.empty() && inputs.size() == devices.size() &&
                    (into.empty() || into.size() == inputs.size()),
                "graph: one input list and one device per participant");
    RECORD_FUNCTION(name.c_str(), c10::ArrayRef<const c10::IValue>{});
    std::vector<Side> sides(inputs.size());
    for (size_t r = 0; r < inputs.size(); r++)
      prepare(inputs[r], into.empty() ? std::vector<std::optional<at::Tensor>>{} : into[r],
              static_cast<c10::DeviceIndex>(devices[r]), sides[r]);
    execute(sides, devices);
    std::vector<std::vector<std::optional<at::Tensor>>> res;
    for (Side& s : sides) res.push_back(std::move(s.outs));
    return res;
  }
};

void register_graph(py::module& m) {
  m.def("pad_rule", &pad_rule);
  py::register_exception<GraphBuildError>(m, "GraphBuildError", PyExc_RuntimeError);
  py::class_<Graph>(m, "Graph")
      .def(py::init<>())
      .def("input", &Graph::input)
      .def("node", &Graph::node)
      .def("set_outputs", &Graph::set_outputs)
      .def("set_strides", &Graph::set_strides)
      .def("set_name", &Graph::set_name)
      .def_property_readonly("name", [](const Graph& g) { return g.name; })
      .def("run", &Graph::run, py::arg("inputs"), py::arg("into") = std::vector<std::optional<at::Tensor>>{})
      .def("run_replicated", &Graph::run_replicated, py::arg("inputs"), py::arg("devices"),
           py::arg("into") = std::vector<std::vector<std::optional<at::Tensor>>>{})
      .def_property_readonly("fingerprint", [](const Graph& g) { return tp_graph_fingerprint(g.g); })
      .def_property_readonly("node_count", [](const Graph& g) { return tp_graph_node_count(g.g); })
      .def_property_readonly("random_count", [](const Graph& g) { return tp_graph_random_count(g.g); });
}

}  // namespace tp_glue
