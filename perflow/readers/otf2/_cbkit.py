"""What the OTF2 callbacks share (:mod:`._callbacks`, :mod:`._rmacb`): typed pointers, signatures, failure.

Nothing here imports numba: the intrinsics are :func:`perflow._jit.intrinsic`
stand-ins and the signatures are numba's signature strings, resolved when
:func:`perflow._jit.cfunc` compiles a callback (on its first ``address``).
"""

from __future__ import annotations

import numpy as np

from ..._jit import carray, intrinsic, load_numba, njit
from . import _layout as L

__all__ = ["carray", "fail", "seconds", "sig", "f64", "i64", "i32", "i16", "i8", "U64", "U32", "U8", "VP"]


def _no_python(*args: object) -> None:
    raise NotImplementedError("typed-pointer intrinsics run compiled only")


def _pointer_intrinsic(name: str):  # noqa: ANN202 - numba intrinsic
    def _ptr(typingctx, addr):  # noqa: ANN001, ANN202
        types = load_numba().types
        ty = types.CPointer(getattr(types, name))
        sig = ty(types.int64)

        def codegen(context, builder, signature, args):  # noqa: ANN001, ANN202
            return builder.inttoptr(args[0], context.get_value_type(ty))

        return sig, codegen

    _ptr.__name__ = f"_ptr_{name}"
    return intrinsic(python=_no_python)(_ptr)


#: typed pointers from an address (``f64(addr)[i] = x``)
f64 = _pointer_intrinsic("float64")
i64 = _pointer_intrinsic("int64")
i32 = _pointer_intrinsic("int32")
i16 = _pointer_intrinsic("int16")
i8 = _pointer_intrinsic("int8")

#: argument types of the callbacks' signatures
U64, U32, U8, VP = "uint64", "uint32", "uint8", "voidptr"


def sig(*extra: str) -> str:
    """An OTF2 event callback's signature: location, time, event position, user data, attributes, then ``extra``."""
    return f"int32({', '.join((U64, U64, U64, VP, VP, *extra))})"


@njit(python=False)
def fail(st, code, ref):  # noqa: ANN001, ANN202
    st[L.S_ERR] = code
    st[L.S_ERRREF] = ref
    return 1  # OTF2_CALLBACK_INTERRUPT


@njit(python=False)
def seconds(st, stf, t):  # noqa: ANN001, ANN202
    return np.float64(np.int64(t - np.uint64(st[L.S_OFF]))) / stf[L.S_RES]
