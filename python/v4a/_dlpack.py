"""Reading DLPack capsules with ctypes: a tensor's pointer, device, dtype and
shape, from any producer with ``__dlpack__`` (PyTorch, NumPy, CuPy)."""

import ctypes

# DLDeviceType values this package takes.
CPU, CUDA, CUDA_HOST, CUDA_MANAGED = 1, 2, 3, 13
# DLDataTypeCode values, and the dtype names they make with their bits.
_DTYPES = {(2, 32): "f32", (4, 16): "bf16", (2, 16): "f16",
           (10, 8): "f8_e4m3", (14, 8): "f8_e8m0", (1, 8): "u8"}


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device),
                ("ndim", ctypes.c_int32), ("dtype", _DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    pass


_Managed._fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p),
                     ("deleter", ctypes.CFUNCTYPE(None,
                                                  ctypes.POINTER(_Managed)))]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _ManagedVersioned(ctypes.Structure):
    pass


_ManagedVersioned._fields_ = [
    ("version", _Version), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(_ManagedVersioned))),
    ("flags", ctypes.c_uint64), ("dl_tensor", _Tensor)]

_READ_ONLY = 1

_api = ctypes.pythonapi
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]


class View:
    """A consumed DLPack tensor: ``pointer``, ``device_type``, ``device_id``,
    ``dtype`` (a name, or None for others), ``shape``, ``contiguous`` and
    ``read_only``. ``release()`` (or the ``with`` block's end) hands it back
    to its producer; the caller keeps the tensor itself alive."""

    __slots__ = ("pointer", "device_type", "device_id", "dtype", "type_name",
                 "shape", "contiguous", "read_only", "_managed", "_deleter")

    def __init__(self, managed, tensor, read_only):
        self._managed = managed
        self._deleter = managed.contents.deleter
        ndim = tensor.ndim
        self.shape = tuple(tensor.shape[i] for i in range(ndim))
        self.pointer = (tensor.data or 0) + tensor.byte_offset
        self.device_type = tensor.device.device_type
        self.device_id = tensor.device.device_id
        key = (tensor.dtype.code, tensor.dtype.bits)
        self.dtype = _DTYPES.get(key) if tensor.dtype.lanes == 1 else None
        self.type_name = self.dtype or "DLPack type (code %d, %d bits, %d "\
            "lanes)" % (key + (tensor.dtype.lanes,))
        self.read_only = read_only
        self.contiguous = True
        if tensor.strides:
            expected = 1
            for i in reversed(range(ndim)):
                if self.shape[i] != 1 and tensor.strides[i] != expected:
                    self.contiguous = False
                expected *= self.shape[i]

    def release(self):
        if self._managed is not None and self._deleter:
            self._deleter(self._managed)
        self._managed = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def consume(obj, stream=None):
    """The DLPack view of ``obj`` (anything with ``__dlpack__``); ``stream``
    (an int) is the CUDA stream the consumer will use, so that the producer
    orders its pending work before it."""
    if not hasattr(obj, "__dlpack__"):
        raise TypeError("%s has no __dlpack__: pass a PyTorch, NumPy or CuPy "
                        "array" % type(obj).__name__)
    # A stream means something to device memory alone (NumPy refuses one).
    if stream is not None and hasattr(obj, "__dlpack_device__") and \
            obj.__dlpack_device__()[0] not in (CUDA, CUDA_MANAGED):
        stream = None
    kwargs = {} if stream is None else {"stream": stream}
    try:
        capsule = obj.__dlpack__(max_version=(1, 0), **kwargs)
    except TypeError:
        capsule = obj.__dlpack__(**kwargs)
    if _api.PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        address = _api.PyCapsule_GetPointer(capsule, b"dltensor_versioned")
        managed = ctypes.cast(address, ctypes.POINTER(_ManagedVersioned))
        _api.PyCapsule_SetName(capsule, b"used_dltensor_versioned")
        flags = managed.contents.flags
        return View(managed, managed.contents.dl_tensor,
                    bool(flags & _READ_ONLY))
    address = _api.PyCapsule_GetPointer(capsule, b"dltensor")
    managed = ctypes.cast(address, ctypes.POINTER(_Managed))
    _api.PyCapsule_SetName(capsule, b"used_dltensor")
    return View(managed, managed.contents.dl_tensor, False)
