"""DFLARE's layer fusion from Python through libflaretune's C API, with ctypes and NumPy only.

    python3 api_ctypes.py [LIBRARY] [BACKEND]    (default: libflaretune.so.0, cpu)
"""
import ctypes as C
import sys

try:
    import numpy as np
except ImportError:
    sys.exit(f"api_ctypes.py: needs NumPy, which {sys.executable} cannot import "
             "(apt-get install python3-numpy, or pip install numpy)")

lib = C.CDLL(sys.argv[1] if len(sys.argv) > 1 else "libflaretune.so.0")
backend = sys.argv[2] if len(sys.argv) > 2 else "cpu"
lib.flaretune_message.restype = C.c_char_p
lib.flaretune_last_config.restype = C.c_char_p
lib.flaretune_bind.argtypes = [C.c_void_p, C.c_char_p, C.c_void_p, C.c_int, C.c_int,
                               C.POINTER(C.c_int64), C.c_int]
F32, HOST = 0, 0


def check(status, ctx):
    if status != 0:
        raise RuntimeError(lib.flaretune_message(ctx).decode())


ctx = C.c_void_p()
check(lib.flaretune_create(C.byref(ctx), backend.encode()), ctx)
try:
    D, N, T, H = 3, 48, 4, 64
    rng = np.random.default_rng(7)
    x = rng.standard_normal((N, T, H), dtype=np.float32)
    w = rng.standard_normal((D, T), dtype=np.float32)
    g = (1 + 0.1 * rng.standard_normal(H)).astype(np.float32)
    f = np.empty((D, N, H), dtype=np.float32)  # the output, written in place
    for name, a in (("x", x), ("w", w), ("g", g), ("f", f)):
        shape = (C.c_int64 * a.ndim)(*a.shape)
        check(lib.flaretune_bind(ctx, name.encode(), a.ctypes.data, F32, a.ndim, shape, HOST), ctx)
    check(lib.flaretune_run(ctx, b"fusion.dflare", None, None), ctx)

    # SPEC.md: a = softmax_t(w[i]); s = sum_t a[i,t] x[n,t]; f = s / rms(s) * g.
    a = np.exp(w - w.max(1, keepdims=True))
    a /= a.sum(1, keepdims=True)
    s = np.einsum("it,nth->inh", a.astype(np.float64), x.astype(np.float64))
    ref = s / np.sqrt((s * s).mean(-1, keepdims=True) + 1e-6) * g
    err = np.abs(f - ref).max() / np.abs(ref).max()
    print(f"fusion.dflare on {backend}: config {lib.flaretune_last_config(ctx).decode()}")
    print(f"  f {f.shape}, max relative error {err:.2e} against NumPy in float64")
    assert err < 1e-5, err
finally:
    lib.flaretune_destroy(ctx)
