"""The programs a mode runs, intercepted (`Recorder`): every call of a jitted program is
lowered and compiled for the target's compile-only devices instead of run, and answers with
placeholders of its output shapes (`DeviceValue`), so the mode's host code carries on as it
would. `Program` is one compiled program with its memory and cost analyses, which
engines/compile.py reads per case."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import time

from mibench.errors import MibenchError


class DeviceValue:
    """A program's result as the scorer sees it: shape, dtype and sharding, no data. Read
    on the host (`np.asarray`) it is zeros of its shape, counted as bytes read back."""

    is_fully_addressable = True

    def __init__(self, info, sharding, recorder: Recorder):
        self.shape, self.dtype, self.sharding = tuple(info.shape), info.dtype, sharding
        self.ndim = len(self.shape)
        self._recorder = recorder
        recorder.live.add(self)  # on the chips for as long as the scorer holds it

    @property
    def nbytes(self) -> int:
        import numpy as np

        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    def __array__(self, dtype=None, copy=None):
        import numpy as np

        self._recorder.to_host_bytes += self.nbytes
        return np.zeros(self.shape, dtype or self.dtype)

    def abstract(self):
        import jax

        return jax.ShapeDtypeStruct(self.shape, self.dtype, sharding=self.sharding)


def chip_bytes(x) -> int:
    """Bytes of an array (or ShapeDtypeStruct) on one chip of its sharding."""
    import numpy as np

    shape = x.sharding.shard_shape(tuple(x.shape)) if getattr(x, "sharding", None) else x.shape
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(x.dtype).itemsize


@dataclasses.dataclass
class Program:
    """One compiled program: what it is, what it costs per call, how often a pass calls it."""

    name: str
    function: str
    signature: str
    compiled: object = None
    out_info: object = None
    out_shardings: object = None
    compile_s: float = 0.0
    error: str | None = None
    # device arguments XLA dropped as unused (the LM head takes only the embedding): they
    # stay on the chips, the engine holds them
    dropped_bytes: int = 0
    # the most bytes of other results the scorer held on the chips during a call (e.g. the
    # prefix KV cache while the LM head runs)
    held_bytes: int = 0
    # FLOPs per call (per chip) of the program compiled with every lax.scan unrolled: every
    # layer counted; None when it could not be had
    flops_unrolled: float | None = None
    calls: list = dataclasses.field(default_factory=lambda: [0, 0])  # per pass
    host_args: dict = dataclasses.field(default_factory=dict)  # arg name -> bytes per call


def program_modules() -> list:
    """The modules whose jitted functions are the programs: every mode module, and the
    engine itself."""
    import importlib
    import pkgutil

    from . import modes

    names = [f"{modes.__name__}.{m.name}" for m in pkgutil.iter_modules(modes.__path__)]
    return [importlib.import_module(n) for n in [*names, "mibench.engines.jax_engine"]]


class Recorder:
    """Stands in for the modes' jitted functions while a pass runs (see the module doc)."""

    def __init__(self, unrolled: bool = False):
        import weakref

        self.unrolled = unrolled  # also compile each program with its scans unrolled
        self.programs: dict[tuple, Program] = {}
        self.live = weakref.WeakSet()  # the DeviceValues the scorer still references
        self.pass_index = 0
        self.to_host_bytes = 0
        self.to_host_by_pass = [0, 0]

    @contextlib.contextmanager
    def intercepting(self):
        saved = []
        for module in program_modules():
            for attr, value in list(vars(module).items()):
                if callable(value) and hasattr(value, "lower") and hasattr(value, "trace"):
                    saved.append((module, attr, value))
                    setattr(module, attr, self.stand_in(attr, value))
        try:
            with _platform("tpu"):
                yield
        finally:
            for module, attr, value in saved:
                setattr(module, attr, value)

    def stand_in(self, name: str, jitted):
        signature = inspect.signature(jitted)
        # which arguments are static (a jax internal; without it, Python scalars are passed
        # as they are and key the program by value: slower, as correct)
        info = getattr(jitted, "_jit_info", None)
        static = set(info.static_argnames) if info is not None else None

        def call(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            return self.call(name, jitted, bound, static)

        return call

    def call(self, name, jitted, bound, static):
        import jax
        import numpy as np

        host, key_parts, call_args, passed = {}, [], {}, set()
        for arg, value in bound.arguments.items():
            if static is not None and arg in static:
                key_parts.append((arg, "static", value))
                call_args[arg] = value
                continue

            def abstract(x, arg=arg):
                if isinstance(x, DeviceValue):
                    passed.add(id(x))
                    return x.abstract()
                if isinstance(x, np.ndarray | np.generic):
                    host[arg] = host.get(arg, 0) + x.nbytes
                    return jax.ShapeDtypeStruct(x.shape, x.dtype)
                if isinstance(x, bool | int | float) and static is None:
                    return x
                if isinstance(x, bool | int | float):
                    host[arg] = host.get(arg, 0) + 4
                    return jax.ShapeDtypeStruct((), np.asarray(x).dtype if isinstance(x, bool)
                                                else jax.numpy.result_type(x), weak_type=True)
                return x

            leaves = jax.tree.map(abstract, value,
                                  is_leaf=lambda x: isinstance(x, DeviceValue))
            call_args[arg] = leaves
            key_parts.append((arg, jax.tree.structure(leaves), tuple(
                (tuple(s.shape), str(s.dtype), getattr(s, "weak_type", False),
                 getattr(s, "sharding", None)) if hasattr(s, "shape") else (type(s), s)
                for s in jax.tree.leaves(leaves))))
        key = (name, tuple(key_parts))
        program = self.programs.get(key)
        if program is None:
            program = self._compile(name, jitted, call_args, host)
            self.programs[key] = program
        program.calls[self.pass_index] += 1
        held = sum(chip_bytes(v) for v in list(self.live) if id(v) not in passed)
        program.held_bytes = max(program.held_bytes, held)
        if program.error is not None:
            raise ProgramFailed(program.name, program.error)
        return jax.tree.map(lambda info, sh: DeviceValue(info, sh, self), program.out_info,
                            program.out_shardings)

    def _compile(self, name, jitted, call_args, host) -> Program:
        fn = getattr(jitted, "__wrapped__", jitted)
        program = Program(name=name, function=f"{fn.__module__}.{fn.__qualname__}",
                          signature=_describe(call_args), host_args=dict(host))
        start = time.perf_counter()
        try:
            lowered = jitted.lower(**call_args)
            program.compiled = lowered.compile()
            program.out_info = lowered.out_info
            program.out_shardings = program.compiled.output_shardings
            program.dropped_bytes = _dropped_bytes(program.compiled, call_args)
        except Exception as e:  # a lowering error, a sharding that does not fit, an OOM
            program.error = compiler_message(e)
        program.compile_s = time.perf_counter() - start
        if program.error is None and self.unrolled:
            program.flops_unrolled = _unrolled_flops(jitted, call_args)
        return program


def _unrolled_flops(jitted, call_args: dict) -> float | None:
    """FLOPs of one call with every `lax.scan` unrolled (the layers, attention tiles), so a
    loop body counts once per iteration: the program is traced again with `jax.lax.scan`
    patched to `unroll=True` (the trace caches cleared around it) and compiled once more
    (the lowered module's own cost analysis is empty for compile-only TPU devices); XLA's
    cost analysis of that program, per chip like `flops`. A Pallas kernel is a custom call
    that the analysis does not see into (its FLOPs count 0 or its cost estimate)."""
    import jax

    scan = jax.lax.scan

    def unrolled(*args, **kwargs):
        kwargs["unroll"] = True
        return scan(*args, **kwargs)

    jax.clear_caches()
    jax.lax.scan = unrolled
    try:
        cost = jitted.lower(**call_args).compile().cost_analysis()
        if isinstance(cost, list | tuple):
            cost = cost[0] if cost else {}
        flops = (cost or {}).get("flops")
        return float(flops) if flops is not None else None
    except Exception:  # the measure is optional; the compiled program stands
        return None
    finally:
        jax.lax.scan = scan
        jax.clear_caches()


def _dropped_bytes(compiled, call_args: dict) -> int:
    """Per-chip bytes of the device arguments (parameters, earlier results) that the
    compiled program does not take: XLA prunes unused arguments (their input sharding is
    None), but the engine keeps them on the chips."""
    import jax

    try:
        shardings = compiled.input_shardings[1]
    except (AttributeError, IndexError, TypeError):
        return 0
    total = 0
    for arg, sharding in shardings.items():
        given = jax.tree.leaves(call_args.get(arg))
        taken = jax.tree.leaves(sharding, is_leaf=lambda x: x is None)
        if len(given) != len(taken):
            continue
        total += sum(chip_bytes(a) for a, t in zip(given, taken, strict=True)
                     if t is None and getattr(a, "sharding", None) is not None)
    return total


class ProgramFailed(MibenchError):
    """A program of the case did not lower or compile; the message is the compiler's."""

    def __init__(self, program: str, message: str):
        self.program, self.message = program, message
        super().__init__(message, field=program)


def compiler_message(e: BaseException) -> str:
    """The compiler's (or the engine's) message on one line: the first line that says
    something, without XLA's source-location trailer."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(("===", "learning/", "third_party/"))]
    text = " ".join(lines[:3]) if lines else type(e).__name__
    return f"{type(e).__name__}: {text}"[:2000]


@contextlib.contextmanager
def _platform(name: str):
    """`jax.default_backend()` reads `name` while the programs are traced: the one place the
    engine's code asks for the backend (the LM head's vocabulary block, 2048 on a CPU, 32k
    on an accelerator) must see the target, not this process's CPU backend."""
    import jax

    saved = jax.default_backend
    jax.default_backend = lambda: name
    try:
        yield
    finally:
        jax.default_backend = saved


def _describe(call_args: dict) -> str:
    """`arg: dtype[shape], ...` of a program's array arguments but the parameters."""
    import jax

    parts = []
    for arg, value in call_args.items():
        leaves = jax.tree.leaves(value)
        arrays = leaves and all(hasattr(x, "shape") and hasattr(x, "dtype") for x in leaves)
        if arg != "params" and arrays:
            parts.append(", ".join(f"{arg}: {x.dtype}[{','.join(map(str, x.shape))}]"
                                   for x in leaves))
    return "; ".join(parts)
