"""PyTorch Lightning trains on tpu: `Trainer(accelerator="auto")` and `Trainer(accelerator="tpu")`.

Lightning's "tpu" is its torch_xla accelerator, and its "auto" answers "tpu" only when torch_xla
finds a TPU, else CUDA, MPS or "cpu". Its accelerator registry takes other accelerators, but
its connector picks the strategy and the mixed-precision plugin by name ("tpu" gets the XLA
strategies, anything but cpu/mps gets CUDA's autocast). So when one of Lightning's namespaces
(`lightning.pytorch`, `pytorch_lightning`) loads its accelerator connector, this module:

- registers `TPUAccelerator` (the tpu device, any PJRT plugin) as "pjrt", and as "tpu" where
  torch_xla is not installed: a machine with torch_xla keeps Lightning's own "tpu";
- has "auto" answer that accelerator where Lightning would answer "cpu" and the device is up;
- gives it the strategies CUDA gets: one device, `SingleDeviceStrategy` on it; several (or
  `strategy="ddp"`), DDP over the c10d backend PyTorch maps tpu to (pjrt);
- makes "16-mixed"/"bf16-mixed" autocast on tpu, not CUDA, and builds DDP outside the CUDA
  stream Lightning opens for every device but CPU;
- has the "TPU available" line of the Trainer's device log report this device.
Lightning's files are not touched; its classes are wrapped in memory when the module loads.
"""
import torch

_CONNECTOR = "trainer.connectors.accelerator_connector"
NAMESPACES = ("lightning.pytorch", "pytorch_lightning")


def _parse_devices(devices):
    """Lightning's device forms as device indices: an int n (the first n; -1 for all), a list of
    indices, or a string of either ("2", "0,1", "-1")."""
    count = torch.tpu.device_count()
    if isinstance(devices, str):
        devices = devices.strip()
        if "," in devices:
            devices = [int(d) for d in devices.split(",") if d.strip()]
        else:
            devices = int(devices)
    if isinstance(devices, int):
        devices = list(range(count)) if devices == -1 else list(range(devices))
    devices = [int(d) for d in devices]
    bad = [d for d in devices if not 0 <= d < count]
    if bad or not devices:
        raise ValueError(f"tpu devices {devices} requested, but {count} tpu device(s) are "
                         f"available (TORCH_PJRT_CPU_DEVICES=N gives XLA's CPU plugin N)")
    return devices


def _accelerator_class(base):
    class TPUAccelerator(base):
        """The tpu device (torch_pjrt: any PJRT plugin) as a Lightning accelerator."""

        def setup_device(self, device):
            if device.type != "tpu":
                raise ValueError(f"TPUAccelerator needs a tpu device, got {device}")
            torch.tpu.set_device(device)

        def teardown(self):
            pass

        @staticmethod
        def parse_devices(devices):
            return _parse_devices(devices)

        @staticmethod
        def get_parallel_devices(devices):
            return [torch.device("tpu", i) for i in _parse_devices(devices)]

        @staticmethod
        def auto_device_count():
            return torch.tpu.device_count()

        @staticmethod
        def is_available():
            return torch.tpu.is_available()

        @staticmethod
        def name():
            return "tpu"

        def get_device_stats(self, device):
            return torch.tpu.memory_stats(device)

        @classmethod
        def register_accelerators(cls, registry):
            registry.register("pjrt", cls, description=cls.__doc__, override=True)

    return TPUAccelerator


def _xla_installed(ns):
    import importlib
    return bool(importlib.import_module(f"{_fabric(ns)}.accelerators.xla")._XLA_AVAILABLE)


def _fabric(ns):
    return "lightning.fabric" if ns == "lightning.pytorch" else "lightning_fabric"


def teach(connector_module, ns):
    """Teaches the accelerator connector of Lightning namespace |ns| the tpu device."""
    import importlib
    conn = connector_module._AcceleratorConnector
    if getattr(conn, "_tpu_aware", False):
        return
    accelerators = importlib.import_module(f"{ns}.accelerators")
    ours = _accelerator_class(accelerators.Accelerator)
    ours.__module__ = __name__
    registry = accelerators.AcceleratorRegistry
    ours.register_accelerators(registry)
    if not _xla_installed(ns):
        registry.register("tpu", ours, description=ours.__doc__, override=True)
        # The Trainer's "TPU available: ..., using: N TPU cores" line and its "TPU available but
        # not used" hint read this module's XLAAccelerator: this device, where XLA's is absent.
        importlib.import_module(f"{ns}.trainer.setup").XLAAccelerator = ours
    accelerators.TPUAccelerator = ours

    plain_auto = conn._choose_auto_accelerator

    def _choose_auto_accelerator():
        name = plain_auto()
        if name == "cpu" and torch.tpu.is_available():
            return "tpu" if registry["tpu"]["accelerator"] is ours else "pjrt"
        return name

    plain_strategy = conn._choose_strategy

    def _choose_strategy(self):
        if not isinstance(self.accelerator, ours):
            return plain_strategy(self)
        if self._num_nodes_flag > 1 or len(self._parallel_devices) > 1:
            return "ddp_fork" if connector_module._IS_INTERACTIVE else "ddp"
        return connector_module.SingleDeviceStrategy(device=self._parallel_devices[0])

    plain_precision = conn._check_and_init_precision

    def _check_and_init_precision(self):
        plugin = plain_precision(self)
        if isinstance(self.accelerator, ours) and type(plugin) is connector_module.MixedPrecision:
            return connector_module.MixedPrecision(self._precision_flag, "tpu")
        return plugin

    ddp = importlib.import_module(f"{ns}.strategies.ddp").DDPStrategy
    plain_setup_model = ddp._setup_model

    def _setup_model(self, model):
        # Lightning builds DDP inside a fresh torch.cuda stream for any device but CPU.
        if self.root_device.type != "tpu":
            return plain_setup_model(self, model)
        return torch.nn.parallel.DistributedDataParallel(
            module=model, device_ids=self.determine_ddp_device_ids(), **self._ddp_kwargs)

    ddp._setup_model = _setup_model
    conn._choose_auto_accelerator = staticmethod(_choose_auto_accelerator)
    conn._choose_strategy = _choose_strategy
    conn._check_and_init_precision = _check_and_init_precision
    conn._tpu_aware = True


def hooks():
    """Module name -> hook, for _integrations' import hooks."""
    return {f"{ns}.{_CONNECTOR}": (lambda m, ns=ns: teach(m, ns)) for ns in NAMESPACES}
