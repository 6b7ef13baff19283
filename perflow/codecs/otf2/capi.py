"""The OTF2 C library bundled with the ``otf2`` wheel, through :mod:`ctypes`.

The ``otf2`` Python package ships the complete OTF2 C library as its
extension module ``_otf2/_otf2*.so``; its exported ``OTF2_*`` functions are
the documented C API. This module loads that library once, declares the
prototypes perflow uses, and replaces OTF2's default error handler (which
prints to stderr) by one that collects the messages, so that a failing call
can be turned into one :class:`~perflow.errors.FormatError` that says what the
library found wrong.
"""

from __future__ import annotations

import ctypes
import platform
import threading
from functools import cache
from typing import Any

__all__ = ["lib", "available", "error_messages", "error_summary", "clear_errors", "error_name", "OTF2_SUCCESS"]

OTF2_SUCCESS = 0

_vp = ctypes.c_void_p
_u64 = ctypes.c_uint64
_u32 = ctypes.c_uint32
_u8 = ctypes.c_uint8
_int = ctypes.c_int
_str = ctypes.c_char_p

# name: (restype, argtypes)
_PROTOTYPES: dict[str, tuple[Any, list[Any]]] = {
    # errors
    "OTF2_Error_GetName": (_str, [_int]),
    "OTF2_Error_GetDescription": (_str, [_int]),
    # reader
    "OTF2_Reader_Open": (_vp, [_str]),
    "OTF2_Reader_Close": (_int, [_vp]),
    "OTF2_Reader_SetSerialCollectiveCallbacks": (_int, [_vp]),
    "OTF2_Reader_SelectLocation": (_int, [_vp, _u64]),
    "OTF2_Reader_OpenDefFiles": (_int, [_vp]),
    "OTF2_Reader_CloseDefFiles": (_int, [_vp]),
    "OTF2_Reader_OpenEvtFiles": (_int, [_vp]),
    "OTF2_Reader_CloseEvtFiles": (_int, [_vp]),
    "OTF2_Reader_GetDefReader": (_vp, [_vp, _u64]),
    "OTF2_Reader_CloseDefReader": (_int, [_vp, _vp]),
    "OTF2_Reader_ReadAllLocalDefinitions": (_int, [_vp, _vp, ctypes.POINTER(_u64)]),
    "OTF2_Reader_GetNumberOfGlobalDefinitions": (_int, [_vp, ctypes.POINTER(_u64)]),
    "OTF2_Reader_GetNumberOfLocations": (_int, [_vp, ctypes.POINTER(_u64)]),
    "OTF2_Reader_GetGlobalDefReader": (_vp, [_vp]),
    "OTF2_Reader_CloseGlobalDefReader": (_int, [_vp, _vp]),
    "OTF2_Reader_ReadAllGlobalDefinitions": (_int, [_vp, _vp, ctypes.POINTER(_u64)]),
    "OTF2_Reader_GetEvtReader": (_vp, [_vp, _u64]),
    "OTF2_Reader_CloseEvtReader": (_int, [_vp, _vp]),
    "OTF2_Reader_RegisterEvtCallbacks": (_int, [_vp, _vp, _vp, _vp]),
    "OTF2_Reader_ReadLocalEvents": (_int, [_vp, _vp, _u64, ctypes.POINTER(_u64)]),
    "OTF2_EvtReaderCallbacks_New": (_vp, []),
    "OTF2_EvtReaderCallbacks_Delete": (None, [_vp]),
    # writer (archive + global definitions; per-event calls are made from numba)
    "OTF2_Archive_Open": (_vp, [_str, _str, _u8, _u64, _u64, _u8, _u8]),
    "OTF2_Archive_Close": (_int, [_vp]),
    "OTF2_Archive_SetFlushCallbacks": (_int, [_vp, _vp, _vp]),
    "OTF2_Archive_SetSerialCollectiveCallbacks": (_int, [_vp]),
    "OTF2_Archive_SetCreator": (_int, [_vp, _str]),
    "OTF2_Archive_SetDescription": (_int, [_vp, _str]),
    "OTF2_Archive_OpenEvtFiles": (_int, [_vp]),
    "OTF2_Archive_CloseEvtFiles": (_int, [_vp]),
    "OTF2_Archive_OpenDefFiles": (_int, [_vp]),
    "OTF2_Archive_CloseDefFiles": (_int, [_vp]),
    "OTF2_Archive_GetEvtWriter": (_vp, [_vp, _u64]),
    "OTF2_Archive_CloseEvtWriter": (_int, [_vp, _vp]),
    "OTF2_Archive_GetDefWriter": (_vp, [_vp, _u64]),
    "OTF2_Archive_CloseDefWriter": (_int, [_vp, _vp]),
    "OTF2_Archive_GetGlobalDefWriter": (_vp, [_vp]),
    "OTF2_EvtWriter_GetNumberOfEvents": (_int, [_vp, ctypes.POINTER(_u64)]),
    "OTF2_GlobalDefWriter_WriteClockProperties": (_int, [_vp, _u64, _u64, _u64, _u64]),
    "OTF2_GlobalDefWriter_WriteString": (_int, [_vp, _u32, _str]),
    "OTF2_GlobalDefWriter_WriteSystemTreeNode": (_int, [_vp, _u32, _u32, _u32, _u32]),
    "OTF2_GlobalDefWriter_WriteLocationGroup": (_int, [_vp, _u32, _u32, _u8, _u32, _u32]),
    "OTF2_GlobalDefWriter_WriteLocation": (_int, [_vp, _u64, _u32, _u8, _u64, _u32]),
    "OTF2_GlobalDefWriter_WriteRegion": (_int, [_vp, _u32, _u32, _u32, _u32, _u8, _u8, _u32, _u32, _u32, _u32]),
    "OTF2_GlobalDefWriter_WriteGroup": (_int, [_vp, _u32, _u32, _u8, _u8, _u32, _u32, ctypes.POINTER(_u64)]),
    "OTF2_GlobalDefWriter_WriteComm": (_int, [_vp, _u32, _u32, _u32, _u32, _u32]),
    "OTF2_GlobalDefWriter_WriteMetricMember": (_int, [_vp, _u32, _u32, _u32, _u8, _u8, _u8, _u8, ctypes.c_int64, _u32]),
    "OTF2_GlobalDefWriter_WriteMetricClass": (_int, [_vp, _u32, _u8, ctypes.POINTER(_u32), _u8, _u8]),
    "OTF2_GlobalDefWriter_WriteInterruptGenerator": (_int, [_vp, _u32, _u32, _u8, _u8, ctypes.c_int64, _u64]),
    "OTF2_GlobalDefWriter_WriteSourceCodeLocation": (_int, [_vp, _u32, _u32, _u32]),
    "OTF2_GlobalDefWriter_WriteCallingContext": (_int, [_vp, _u32, _u32, _u32, _u32]),
    "OTF2_GlobalDefWriter_WriteCallingContextProperty": (_int, [_vp, _u32, _u32, _u8, _u64]),
}

# va_list is a pointer to a register save area on x86-64 System V, so vsnprintf
# can format the message there; elsewhere only the format string is kept.
_ERRCB = ctypes.CFUNCTYPE(_int, _vp, _str, _u64, _str, _int, _str, _vp)
_MAX_ERRORS = 20
_errors = threading.local()


def _messages() -> list[str]:
    if not hasattr(_errors, "messages"):
        _errors.messages = []
    return _errors.messages


@cache
def _vsnprintf() -> Any:
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        libc = ctypes.CDLL(None)
        f = libc.vsnprintf
    except (OSError, AttributeError):
        return None
    f.restype = _int
    f.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, _vp]
    return f


def _on_error(user_data: int, file: bytes, line: int, function: bytes, code: int, fmt: bytes, va: int) -> int:
    try:
        msgs = _messages()
        if len(msgs) < _MAX_ERRORS:
            text = (fmt or b"").decode("utf-8", "replace")
            vsn = _vsnprintf()
            if vsn is not None and fmt and va:
                buf = ctypes.create_string_buffer(512)
                vsn(buf, 512, fmt, va)
                text = buf.value.decode("utf-8", "replace")
            msgs.append((int(code), text))
    except Exception:  # noqa: BLE001 - never let an exception cross into C
        pass
    return code


_error_callback = _ERRCB(_on_error)


@cache
def lib() -> ctypes.CDLL:
    """Return the loaded OTF2 C library (raises ImportError/OSError when absent)."""
    from _otf2.Config import lib_path  # the otf2 wheel's own locator

    handle = ctypes.CDLL(lib_path())
    for name, (restype, argtypes) in _PROTOTYPES.items():
        f = getattr(handle, name)
        f.restype = restype
        f.argtypes = argtypes
    reg = handle.OTF2_Error_RegisterCallback
    reg.restype = _vp
    reg.argtypes = [_ERRCB, _vp]
    reg(_error_callback, None)
    return handle


def available() -> bool:
    """Whether the OTF2 C library can be loaded."""
    try:
        lib()
    except (ImportError, OSError, AttributeError):
        return False
    return True


def error_name(code: int) -> str:
    """Return the OTF2 library's description of an error code."""
    try:
        h = lib()
        desc = (h.OTF2_Error_GetDescription(code) or b"").decode()
    except Exception:  # noqa: BLE001
        return f"OTF2 error {code}"
    return desc or f"OTF2 error {code}"


def clear_errors() -> None:
    """Forget the messages collected so far in this thread."""
    _messages().clear()


def error_messages() -> list[str]:
    """Messages the OTF2 library reported in this thread since the last :func:`clear_errors`."""
    return [text for _, text in _messages()]


def error_summary(rc: int | None = None, last: int = 3) -> str:
    """One line for a FormatError: the OTF2 error name and the library's last messages."""
    msgs = _messages()
    code = rc if rc else (msgs[-1][0] if msgs else 0)
    name = error_name(code) if code else "OTF2 error"
    texts = [t for _, t in msgs[-last:] if t]
    return f"{name}: {'; '.join(texts)}" if texts else name
