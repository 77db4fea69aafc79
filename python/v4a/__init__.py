"""v4a: the attention layers of DeepSeek-V4-class models, from Python.

A thin layer over the C ABI (``v4a.h``) through ctypes: no compiled
extension. Tensors go in and out through DLPack (PyTorch, NumPy, CuPy);
GPU steps queue on the current CUDA stream of the tensors' framework, or
the stream passed in, without synchronizing it.

    import v4a, torch
    model = v4a.Model.open_package("layer.v4apkg", max_sequences=128)
    model.load_checkpoint("model.safetensors")
    seq = model.add_sequence()
    x = torch.randn(prompt, model.hidden_size, device="cuda",
                    dtype=torch.bfloat16)
    (y,) = model.step([seq], [prompt], [x])

The library is ``libv4a.so`` (packages and in-process compiling) or
``libv4a_runtime.so`` (packages only), found through ``V4A_LIBRARY``, beside
this package, in the build tree, or on the loader's path; ``load_library``
picks one explicitly.
"""

import array
import ctypes
import json
import os

from . import _dlpack

__all__ = ["V4AError", "Model", "load_library", "version",
           "make_communicator_id", "ABI_VERSION"]

#: The ABI this package speaks; the library's must be the same.
ABI_VERSION = 2

_OK = 0
_STATUS = {1: "invalid argument", 2: "invalid state", 3: "unsupported",
           4: "ABI mismatch", 5: "failed"}
_DTYPE = {"f32": 0, "bf16": 1, "f16": 2, "f8_e4m3": 3, "f8_e8m0": 4}
_HOST, _CUDA = 0, 1
_COMPONENTS = ("window", "compressed", "index_keys", "compressor_state",
               "indexer_state")


class V4AError(RuntimeError):
    """A failed call: ``status`` (the C ABI's code, e.g. "invalid argument")
    and the library's message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class _Options(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32),
                ("use_graphs", ctypes.c_int32),
                ("max_sequences", ctypes.c_int64),
                ("layers", ctypes.POINTER(ctypes.c_int64)),
                ("num_layers", ctypes.c_int32), ("device", ctypes.c_int32),
                ("backend", ctypes.c_char_p),
                ("context_tokens", ctypes.c_int64),
                ("page_size", ctypes.c_int64),
                ("kv_layout", ctypes.c_char_p),
                ("index_layout", ctypes.c_char_p),
                ("tensor_parallel", ctypes.c_int32),
                ("tensor_rank", ctypes.c_int32)]


class _Weight(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int),
                ("ndim", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("data", ctypes.c_void_p)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("memory", ctypes.c_int), ("device", ctypes.c_int32),
                ("rows", ctypes.c_int64), ("cols", ctypes.c_int64)]


class _Info(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32),
                ("num_layers", ctypes.c_int32),
                ("num_selected", ctypes.c_int32),
                ("device", ctypes.c_int32), ("hidden_size", ctypes.c_int64),
                ("max_sequences", ctypes.c_int64),
                ("context_tokens", ctypes.c_int64),
                ("page_size", ctypes.c_int64),
                ("cache_bytes", ctypes.c_int64),
                ("weight_bytes", ctypes.c_int64),
                ("workspace_bytes", ctypes.c_int64),
                ("weights_loaded", ctypes.c_int32),
                ("backend", ctypes.c_char * 8),
                ("tensor_parallel", ctypes.c_int32),
                ("tensor_rank", ctypes.c_int32)]


_P = ctypes.c_void_p
_I64P = ctypes.POINTER(ctypes.c_int64)
_SIGNATURES = {
    "v4a_version": (ctypes.c_char_p, []),
    "v4a_abi_version": (ctypes.c_int32, []),
    "v4a_last_error": (ctypes.c_char_p, []),
    "v4a_options_init": (None, [ctypes.POINTER(_Options)]),
    "v4a_open_package": (ctypes.c_int, [ctypes.c_char_p,
                                        ctypes.POINTER(_Options),
                                        ctypes.POINTER(_P)]),
    "v4a_compile": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_Options),
                                   ctypes.POINTER(_P)]),
    "v4a_free": (None, [_P]),
    "v4a_load_checkpoint": (ctypes.c_int, [_P, ctypes.c_char_p]),
    "v4a_load_random_weights": (ctypes.c_int, [_P, ctypes.c_uint64]),
    "v4a_load_weights": (ctypes.c_int, [_P, ctypes.POINTER(_Weight),
                                        ctypes.c_int64]),
    "v4a_add_sequence": (ctypes.c_int, [_P, _I64P]),
    "v4a_release_sequence": (ctypes.c_int, [_P, ctypes.c_int64]),
    "v4a_position": (ctypes.c_int, [_P, ctypes.c_int64, _I64P]),
    "v4a_step": (ctypes.c_int, [_P, ctypes.c_int32, _I64P, _I64P,
                                ctypes.POINTER(_Tensor),
                                ctypes.POINTER(_Tensor), ctypes.c_int32, _P]),
    "v4a_synchronize": (ctypes.c_int, [_P]),
    "v4a_make_communicator_id": (ctypes.c_int, [ctypes.c_char_p]),
    "v4a_join_ranks": (ctypes.c_int, [_P, ctypes.c_char_p]),
    "v4a_use_communicator": (ctypes.c_int, [_P, _P]),
    "v4a_get_info": (ctypes.c_int, [_P, ctypes.POINTER(_Info)]),
    "v4a_selected_layers": (ctypes.c_int, [_P, _I64P, ctypes.c_int32,
                                           ctypes.POINTER(ctypes.c_int32)]),
    "v4a_cache_size": (ctypes.c_int, [_P, ctypes.c_int64, ctypes.c_char_p,
                                      _I64P]),
}

_library = None


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("V4A_LIBRARY"):
        yield os.environ["V4A_LIBRARY"]
    names = ["libv4a.so.%d" % ABI_VERSION, "libv4a_runtime.so.%d" % ABI_VERSION]
    for name in names:
        yield os.path.join(here, "lib", name)
        yield os.path.join(here, "..", "..", "build", "lib", name)
        yield os.path.join(here, "..", "..", "..", "lib", name)
    yield from names


def load_library(path=None):
    """Loads the v4a library at ``path`` (default: ``V4A_LIBRARY``, beside
    the package, the build tree, then the loader's path) and checks its ABI.
    Returns the path's library; called on first use otherwise."""
    global _library
    tried = []
    for candidate in [path] if path else _candidates():
        if os.sep in candidate and not os.path.exists(candidate):
            tried.append(candidate)
            continue
        try:
            library = ctypes.CDLL(candidate)
        except OSError as error:
            tried.append("%s (%s)" % (candidate, error))
            continue
        for name, (restype, argtypes) in _SIGNATURES.items():
            function = getattr(library, name)
            function.restype, function.argtypes = restype, argtypes
        if library.v4a_abi_version() != ABI_VERSION:
            raise V4AError("ABI mismatch", "%s implements ABI %d, this package "
                           "ABI %d" % (candidate, library.v4a_abi_version(),
                                       ABI_VERSION))
        _library = library
        return library
    raise V4AError("failed", "cannot load the v4a library; tried: " +
                   "; ".join(tried) + " (set V4A_LIBRARY)")


def _lib():
    return _library or load_library()


def make_communicator_id():
    """A new NCCL communicator id (128 bytes) for ``Model.join_ranks``:
    rank 0 makes it and hands it to the other ranks' processes."""
    buffer = ctypes.create_string_buffer(128)
    _check(_lib().v4a_make_communicator_id(buffer))
    return buffer.raw


def version():
    """The library's version, e.g. "v4a 0.11"."""
    return _lib().v4a_version().decode()


def _check(status):
    if status != _OK:
        message = _lib().v4a_last_error().decode()
        raise V4AError(_STATUS.get(status, "status %d" % status), message)


def _options(max_sequences, layers, device, use_graphs, backend="cpu",
             context_tokens=4096, page_size=64, kv_layout=None,
             index_layout=None, tensor_parallel=1, tensor_rank=0):
    options = _Options()
    _lib().v4a_options_init(ctypes.byref(options))
    options.max_sequences = max_sequences
    options.device = device
    options.use_graphs = 1 if use_graphs else 0
    options.backend = backend.encode()
    options.context_tokens = context_tokens
    options.page_size = page_size
    if kv_layout is not None:
        options.kv_layout = kv_layout.encode()
    if index_layout is not None:
        options.index_layout = index_layout.encode()
    options.tensor_parallel = tensor_parallel
    options.tensor_rank = tensor_rank
    if layers is not None:
        ids = (ctypes.c_int64 * len(layers))(*layers)
        options.layers = ids
        options.num_layers = len(layers)
        options._ids = ids  # kept alive with the options
    return options


def _streams(stream, tensor):
    """The CUDA stream a GPU step queues on, as the C ABI and as DLPack take
    it: ``stream`` (an int, a torch.cuda.Stream, a CuPy stream), else the
    current stream of the tensor's framework on its device; (None, None)
    for host tensors. The legacy default stream (0) is the model's own
    stream for the C ABI (a blocking stream, ordered with it) and 1 for
    DLPack; a stream taken from the framework needs no ordering (-1)."""
    current = stream is None
    if current:
        module = type(tensor).__module__.split(".")[0]
        if module == "torch" and tensor.is_cuda:
            import torch
            # The raw handle where PyTorch offers it (no Stream object).
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            stream = raw(tensor.get_device()) if raw else \
                torch.cuda.current_stream(tensor.device)
        elif module == "cupy":
            import cupy
            stream = cupy.cuda.get_current_stream()
        else:
            return None, None
    for attribute in ("cuda_stream", "ptr"):
        if hasattr(stream, attribute):
            stream = getattr(stream, attribute)
    stream = int(stream)
    return (stream or None), (-1 if current else stream or 1)


class Model:
    """A model's attention layers: caches for ``max_sequences`` sequences,
    weights, and steps over varlen batches. Open one with
    ``Model.open_package`` or ``Model.compile``; ``close()`` (or a ``with``
    block) frees it. Calls on one model are serialized by the library."""

    def __init__(self, handle):
        self._handle = handle
        self._layers = None

    @classmethod
    def open_package(cls, path, max_sequences=4, layers=None, device=0,
                     use_graphs=True, tensor_rank=0):
        """Opens a package (``v4a-compile --target=sm_90a``) for CUDA device
        ``device``. ``layers``: the layer ids to run (default all; a layer's
        sharing sources too). ``use_graphs``: decode-sized steps as recorded
        CUDA graphs. ``tensor_rank``: the rank of a package compiled with
        ``--tensor-parallel`` (weights are given whole; the rank keeps its
        part and a step's outputs are its partial products)."""
        handle = ctypes.c_void_p()
        options = _options(max_sequences, layers, device, use_graphs,
                           tensor_rank=tensor_rank)
        _check(_lib().v4a_open_package(os.fsencode(path),
                                       ctypes.byref(options),
                                       ctypes.byref(handle)))
        return cls(handle)

    @classmethod
    def compile(cls, config, backend="cpu", max_sequences=4, layers=None,
                context_tokens=4096, page_size=64, use_graphs=True,
                kv_layout="bf16", index_layout=None, tensor_parallel=1,
                tensor_rank=0):
        """Compiles a configuration in-process (``libv4a.so`` only):
        ``config`` is a config.json path, its text, or a dict. ``backend``:
        "cpu" or "cuda" (GPU 0); the caches hold ``context_tokens`` per
        sequence, compressed rows in pages of ``page_size``; ``kv_layout``
        ("bf16" or "fp8") and ``index_layout`` ("bf16", "fp8" or "mxfp4";
        None: the library's default, mxfp4)
        are the compressed KV and index key rows. With ``tensor_parallel``
        N > 1 (CPU) the model is rank ``tensor_rank``'s: 1/N of the heads and
        output groups, and a step's outputs are its partial products, to be
        summed over the ranks."""
        if isinstance(config, dict):
            text = json.dumps(config)
        elif isinstance(config, str) and config.lstrip().startswith("{"):
            text = config
        else:
            with open(config, encoding="utf-8") as f:
                text = f.read()
        handle = ctypes.c_void_p()
        options = _options(max_sequences, layers, 0, use_graphs, backend,
                           context_tokens, page_size, kv_layout, index_layout,
                           tensor_parallel, tensor_rank)
        _check(_lib().v4a_compile(text.encode(), ctypes.byref(options),
                                  ctypes.byref(handle)))
        return cls(handle)

    def close(self):
        """Frees the model (its work on a caller's stream must be done)."""
        if self._handle:
            _lib().v4a_free(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if _library is not None:
            self.close()

    def _h(self):
        if not self._handle:
            raise V4AError("invalid state", "the model is closed")
        return self._handle

    # Weights -------------------------------------------------------------

    def load_checkpoint(self, path):
        """Loads the selected layers' attention tensors from a .safetensors
        file (or, with libv4a.so, a sharded checkpoint's
        model.safetensors.index.json)."""
        _check(_lib().v4a_load_checkpoint(self._h(), os.fsencode(path)))

    def load_random_weights(self, seed):
        """Deterministic random weights: those of ``v4a-run-package
        --random-weights SEED``."""
        _check(_lib().v4a_load_random_weights(self._h(), seed))

    def load_weights(self, tensors):
        """Loads weights from host tensors: a dict from checkpoint names
        ("layers.0.attn.wq_a.weight") to arrays with ``__dlpack__`` (f32,
        bf16, f16; fp8 as ``(uint8_array, "f8_e4m3")`` or ``"f8_e8m0"``).
        Names of other parts of a model are ignored."""
        views, shapes, weights = [], [], (_Weight * len(tensors))()
        try:
            for i, (name, tensor) in enumerate(tensors.items()):
                dtype = None
                if isinstance(tensor, tuple):
                    tensor, dtype = tensor
                view = _dlpack.consume(tensor)
                views.append(view)
                if dtype is not None and not (view.dtype == "u8" and
                                              dtype.startswith("f8_")):
                    raise V4AError("invalid argument",
                                   "%s: a dtype is given only for fp8 bytes "
                                   "(a uint8 array with \"f8_e4m3\" or "
                                   "\"f8_e8m0\"), got %s as %s" %
                                   (name, view.type_name, dtype))
                dtype = dtype or view.dtype
                if view.device_type not in (_dlpack.CPU, _dlpack.CUDA_HOST):
                    raise V4AError("invalid argument",
                                   "%s: weights are read from host memory" %
                                   name)
                if dtype not in _DTYPE or not view.contiguous:
                    raise V4AError("invalid argument",
                                   "%s: a contiguous f32, bf16, f16 or fp8 "
                                   "tensor is needed, got %s%s" %
                                   (name, view.type_name,
                                    "" if view.contiguous else
                                    " (not contiguous)"))
                shape = (ctypes.c_int64 * max(1, len(view.shape)))(*view.shape)
                shapes.append(shape)
                weights[i] = _Weight(name.encode(), _DTYPE[dtype],
                                     len(view.shape), shape, view.pointer)
            _check(_lib().v4a_load_weights(self._h(), weights, len(tensors)))
        finally:
            for view in views:
                view.release()

    # Sequences -----------------------------------------------------------

    def add_sequence(self):
        """A new sequence at position 0 in a free slot; returns its id."""
        sequence = ctypes.c_int64()
        _check(_lib().v4a_add_sequence(self._h(), ctypes.byref(sequence)))
        return sequence.value

    def release_sequence(self, sequence):
        """Frees the sequence's slot for a later ``add_sequence``."""
        _check(_lib().v4a_release_sequence(self._h(), sequence))

    def position(self, sequence):
        """The tokens the sequence has processed."""
        position = ctypes.c_int64()
        _check(_lib().v4a_position(self._h(), sequence,
                                   ctypes.byref(position)))
        return position.value

    # Steps ---------------------------------------------------------------

    def step(self, sequences, lengths, inputs, outputs=None, stream=None):
        """One step over a varlen batch: ``sequences[b]`` advances by
        ``lengths[b]`` tokens. ``inputs``: one tensor per selected layer,
        [sum(lengths), hidden_size], tokens packed in batch order (GPU: bf16
        on the model's device; CPU: f32 or bf16 host arrays). ``outputs``:
        tensors of the same shapes to write (default: new ones like the
        inputs). GPU steps queue on ``stream`` (default: the framework's
        current stream) and return without waiting. Returns the outputs."""
        handle = self._h()
        count = len(inputs)
        if outputs is None:
            outputs = [_empty_like(x) for x in inputs]
        if len(outputs) != count or len(lengths) != len(sequences):
            raise V4AError("invalid argument",
                           "%d inputs and %d outputs, %d sequences and %d "
                           "lengths" % (count, len(outputs), len(sequences),
                                        len(lengths)))
        # The producers order their pending work before the step's stream.
        given = stream
        stream, dl_stream = _streams(stream, inputs[0] if count else None)
        ins, outs = (_Tensor * count)(), (_Tensor * count)()
        views = []
        try:
            for i in range(count):
                ins[i] = _described(inputs[i], "input %d" % i, dl_stream,
                                    views)
                outs[i] = _described(outputs[i], "output %d" % i, dl_stream,
                                     views, writable=True)
            if given is not None:
                _order_torch(list(inputs) + list(outputs), stream)
            ids = _int64s(sequences)
            counts = _int64s(lengths)
            _check(_step(handle, len(sequences), ids, counts, ins, outs,
                         count, stream))
        finally:
            for view in views:
                view.release()
        return outputs

    def synchronize(self):
        """Waits for the model's queued steps (on every stream)."""
        _check(_lib().v4a_synchronize(self._h()))

    def join_ranks(self, communicator_id):
        """Makes this tensor-parallel rank (a package compiled with
        ``--tensor-parallel``; ``info()``'s tensor_rank of tensor_parallel)
        one of a communicator (``make_communicator_id``'s bytes, the same
        on every rank), one GPU a rank: every step then ends with its
        outputs summed over the ranks on the device, so that each rank's
        outputs are the whole model's. Returns once every rank has joined
        (fails after $V4A_NCCL_TIMEOUT seconds without them)."""
        communicator_id = bytes(communicator_id)
        if len(communicator_id) != 128:
            raise V4AError("invalid argument", "a communicator id is 128 "
                           "bytes, got %d" % len(communicator_id))
        _check(_lib().v4a_join_ranks(self._h(), communicator_id))

    def use_communicator(self, nccl_comm):
        """As ``join_ranks``, with an NCCL communicator the caller made and
        keeps (an ``ncclComm_t`` as an int) whose rank and size are the
        model's."""
        _check(_lib().v4a_use_communicator(self._h(), int(nccl_comm)))

    # What the model is ---------------------------------------------------

    def info(self):
        """A dict: num_layers, num_selected, device (-1 on the CPU),
        hidden_size, max_sequences, context_tokens, page_size, cache_bytes
        (every slot), weight_bytes, workspace_bytes (the step workspace
        now), weights_loaded, backend, tensor_parallel and tensor_rank (a
        step's outputs are partial when the degree exceeds 1)."""
        info = _Info()
        info.struct_size = ctypes.sizeof(_Info)
        _check(_lib().v4a_get_info(self._h(), ctypes.byref(info)))
        result = {name: getattr(info, name) for name, _ in _Info._fields_
                  if name != "struct_size"}
        result["backend"] = info.backend.decode()
        result["weights_loaded"] = bool(info.weights_loaded)
        return result

    @property
    def hidden_size(self):
        """The width of a token's activation."""
        return self.info()["hidden_size"]

    def selected_layers(self):
        """The ids of the layers that run, in order: the step's tensors."""
        if self._layers is None:
            count = ctypes.c_int32()
            _check(_lib().v4a_selected_layers(self._h(), None, 0,
                                              ctypes.byref(count)))
            ids = (ctypes.c_int64 * max(1, count.value))()
            _check(_lib().v4a_selected_layers(self._h(), ids, count.value,
                                              ctypes.byref(count)))
            self._layers = list(ids[:count.value])
        return self._layers

    def cache_size(self, layer, component):
        """Bytes of one sequence's cache buffer of ``layer``: component is
        one of window, compressed, index_keys, compressor_state,
        indexer_state (0 where the layer has none)."""
        size = ctypes.c_int64()
        _check(_lib().v4a_cache_size(self._h(), layer, component.encode(),
                                     ctypes.byref(size)))
        return size.value


_TORCH_DTYPES = {"torch.float32": "f32", "torch.bfloat16": "bf16"}


def _int64s(values):
    """A C int64 array of ``values`` (the array module converts in C)."""
    packed = array.array("q", values or [0])
    return ctypes.cast(packed.buffer_info()[0], _I64P), packed


def _step(handle, batch, ids, counts, ins, outs, count, stream):
    return _lib().v4a_step(handle, batch, ids[0], counts[0], ins, outs, count,
                           stream)


def _described(x, what, dl_stream, views, writable=False):
    """The C ABI's description of ``x``: PyTorch tensors directly (their
    pointer, dtype, shape and device: DLPack's content without its cost),
    anything else through DLPack (its view kept in ``views``)."""
    if type(x).__module__.startswith("torch") and hasattr(x, "data_ptr"):
        dtype = _TORCH_DTYPES.get(str(x.dtype))
        if x.dim() != 2 or not x.is_contiguous():
            raise V4AError("invalid argument",
                           "%s: a contiguous [tokens, hidden_size] tensor is "
                           "needed, got shape %s%s" %
                           (what, list(x.shape), "" if x.is_contiguous()
                            else " (not contiguous)"))
        if dtype is None:
            raise V4AError("invalid argument",
                           "%s: f32 or bf16 is needed, got %s" % (what, x.dtype))
        cuda = x.is_cuda
        return _Tensor(x.data_ptr(), _DTYPE[dtype], _CUDA if cuda else _HOST,
                       x.get_device() if cuda else 0, x.shape[0], x.shape[1])
    views.append(_dlpack.consume(x, dl_stream))
    return _tensor_of(views[-1], what, writable)


def _order_torch(tensors, stream):
    """For an explicitly given step stream: PyTorch's pending work on its
    current stream comes first (what DLPack's producer does for others),
    and its caching allocator keeps the tensors' memory until the step's
    stream is past them."""
    tensors = [t for t in tensors if type(t).__module__.startswith("torch")
               and getattr(t, "is_cuda", False)]
    if not tensors or not stream:
        return
    import torch
    current = torch.cuda.current_stream(tensors[0].device)
    if current.cuda_stream == stream:
        return
    step = torch.cuda.ExternalStream(stream, device=tensors[0].device)
    event = torch.cuda.Event()
    event.record(current)
    step.wait_event(event)
    for tensor in tensors:
        tensor.record_stream(step)


def _tensor_of(view, what, writable=False):
    if len(view.shape) != 2 or not view.contiguous:
        raise V4AError("invalid argument",
                       "%s: a contiguous [tokens, hidden_size] tensor is "
                       "needed, got shape %s%s" %
                       (what, list(view.shape),
                        "" if view.contiguous else " (not contiguous)"))
    if view.dtype not in ("f32", "bf16"):
        raise V4AError("invalid argument", "%s: f32 or bf16 is needed, got %s"
                       % (what, view.type_name))
    if writable and view.read_only:
        raise V4AError("invalid argument", "%s is read-only" % what)
    cuda = view.device_type in (_dlpack.CUDA, _dlpack.CUDA_MANAGED)
    return _Tensor(view.pointer, _DTYPE[view.dtype], _CUDA if cuda else _HOST,
                   view.device_id if cuda else 0, view.shape[0], view.shape[1])


def _empty_like(x):
    if not hasattr(x, "__dlpack__"):
        raise TypeError("%s has no __dlpack__: pass a PyTorch, NumPy or CuPy "
                        "array" % type(x).__name__)
    if hasattr(x, "new_empty"):  # PyTorch
        return x.new_empty(x.shape)
    module = type(x).__module__.split(".")[0]
    if module == "numpy":
        import numpy
        return numpy.empty_like(x)
    if module == "cupy":
        import cupy
        return cupy.empty_like(x)
    raise V4AError("invalid argument", "pass outputs for tensors of type %s"
                   % type(x).__name__)
