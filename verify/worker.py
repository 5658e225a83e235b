"""Runs inside every launched rank: executes a list of snippets in turn, in this one process.

Importing torch and accelerate costs seconds per process; the proofs themselves take a fraction of a
second. So a launch keeps its ranks up and runs many snippets, putting back between them what a fresh
process would have: Accelerate's singletons, the random generators, the environment, the working
directory. A run under a mutant goes further: every attribute of the libraries' modules and classes is
put back after it (LibraryState), so that nothing the mutant changed, however it changed it, survives
into the next run. The harness watches the status
file each rank writes and enforces the time limits.

    python -m accelerate.commands.launch ... verify/worker.py MANIFEST.json
"""

import ctypes
import contextlib
import faulthandler
import json
import operator
import os
import random
import runpy
import signal
import sys
import time
import traceback
import types


def die_with_the_launcher():
    """Linux's PR_SET_PDEATHSIG: when the launcher that started this rank dies (SIGKILL included), the
    kernel kills this rank, which would otherwise wait a minute in its rendezvous under pid 1."""
    if not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    try:  # the launcher may have died before the line above: then this rank's parent is no launcher
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as parent:
            launched_by_accelerate = b"accelerate" in parent.read()
    except OSError:
        launched_by_accelerate = False
    if not launched_by_accelerate:
        os._exit(1)


die_with_the_launcher()  # before the imports below, which take seconds

import accelerate  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from accelerate import Accelerator  # noqa: E402
from accelerate.state import AcceleratorState, GradientState, PartialState  # noqa: E402


LOG_LIMIT_BYTES = 1_000_000  # per snippet and rank: a snippet printing 50 MB keeps its first megabyte


class CappedLog:
    """A text log that keeps the first `limit` characters and then one line saying how much was cut."""

    def __init__(self, path, limit=LOG_LIMIT_BYTES):
        self.file, self.limit, self.written, self.cut = open(path, "w"), limit, 0, 0

    def write(self, text):
        room = self.limit - self.written
        if room > 0:
            self.file.write(text[:room])
        self.written += min(len(text), max(room, 0))
        self.cut += max(0, len(text) - max(room, 0))
        return len(text)

    def flush(self):
        self.file.flush()

    def isatty(self):  # libraries ask before colouring their output (transformers' loading report does)
        return False

    def __getattr__(self, name):  # anything else a stream has (encoding, fileno, ...) is the file's
        return getattr(self.file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.cut:
            self.file.write(f"\n[output cut: {self.cut} more characters after the first {self.limit} were not kept]\n")
        self.file.close()

sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout: verify.mutation
from verify import mutation  # noqa: E402
from verify.paths import SNIPPETS_DIR  # noqa: E402

# `import _claims` and the other shared helpers come from this checkout's snippets/, whatever
# `pip install -e` last pointed its path file at (another worktree's, or a CI checkout gone since)
sys.path.insert(1, str(SNIPPETS_DIR))


def world_state():
    """What the snippet really ran with, as Accelerate and torch.distributed each see it."""
    seen = {"torch_world_size": None, "torch_rank": None, "backend": None}
    # What the launcher told this process (torchrun's variables): who it is on its node and in the world.
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK"):
        seen["env_" + name.lower()] = int(os.environ[name]) if os.environ.get(name, "").isdigit() else None
    if dist.is_available() and dist.is_initialized():
        seen.update(torch_world_size=dist.get_world_size(), torch_rank=dist.get_rank(), backend=dist.get_backend())
    if PartialState._shared_state != {}:  # a snippet that never made an Accelerator has no accelerate view
        state = AcceleratorState() if AcceleratorState._shared_state != {} else PartialState()
        seen.update(
            accelerate_num_processes=state.num_processes,
            accelerate_process_index=state.process_index,
            accelerate_local_process_index=state.local_process_index,
            distributed_type=str(state.distributed_type).split(".")[-1],
            device=str(state.device),
            mixed_precision=str(getattr(state, "mixed_precision", None)),
        )
    seen["accelerate_version"] = accelerate.__version__  # the release really imported (the matrix swaps it)
    return seen


class FreshProcess:
    """Snapshot of what a snippet may change, taken before the first snippet, put back before each."""

    def __init__(self, snippet_dirs):
        self.snippet_dirs = tuple(os.path.join(os.path.abspath(d), "") for d in snippet_dirs)
        self.environ = dict(os.environ)
        self.cwd = os.getcwd()
        self.sys_path = list(sys.path)
        self.modules = set(sys.modules)
        self.torch_rng = torch.get_rng_state()
        self.python_rng = random.getstate()
        self.numpy_rng = np.random.get_state()
        self.default_dtype = torch.get_default_dtype()
        self.num_threads = torch.get_num_threads()
        self.deterministic = torch.are_deterministic_algorithms_enabled()
        # torch.distributed.run renames the thread that calls it ("pt_elastic"); a proof reads process names
        self.thread_name = torch.multiprocessing._get_thread_name()

    def restore(self):
        os.environ.clear()
        os.environ.update(self.environ)
        os.chdir(self.cwd)
        sys.path[:] = self.sys_path
        # A helper module imported from a snippets folder would keep its module-level state.
        for name in set(sys.modules) - self.modules:
            module_file = getattr(sys.modules[name], "__file__", None) or ""
            if module_file.startswith(self.snippet_dirs):
                del sys.modules[name]
        torch.set_rng_state(self.torch_rng)
        random.setstate(self.python_rng)
        np.random.set_state(self.numpy_rng)
        torch.set_default_dtype(self.default_dtype)
        torch.set_num_threads(self.num_threads)
        torch.use_deterministic_algorithms(self.deterministic)
        torch.multiprocessing._set_thread_name(self.thread_name)
        AcceleratorState._reset_state(reset_partial_state=True)
        if hasattr(GradientState, "_reset_state"):
            GradientState._reset_state()
        else:  # accelerate before 0.18 (the release matrix runs old ones): the singleton is its dict
            GradientState._shared_state.clear()
        if "torch._dynamo" in sys.modules:
            torch._dynamo.reset()


def run_snippet(snippet, run_dir, rank, emit):
    """Runs one snippet in this process; on failure records why and ends the process (the launch with it)."""
    name, path = snippet["name"], snippet["path"]
    sys.path.insert(0, os.path.dirname(path))
    os.environ["PROOF_REPORT_FILE"] = os.path.join(run_dir, f"{name}.rank{{rank}}.claims.jsonl")
    os.environ["VERIFY_SNIPPET"] = name  # names the snippet in any process it leaves behind (verify/reaper.py)
    log_path = os.path.join(run_dir, f"{name}.rank{rank}.log")
    emit("start", snippet=name)
    started = time.perf_counter()
    sys.argv = [path]
    patch = None
    try:
        with CappedLog(log_path) as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            # A mutant: the library broken the way a wrong answer says, for this run only.
            if snippet.get("mutant"):
                patch = mutation.apply(snippet["mutant"]["name"], snippet["mutant"]["source"])
            try:
                runpy.run_path(path, run_name="__main__")
            except SystemExit as exit_request:
                if exit_request.code not in (None, 0):
                    raise
            finally:
                if patch is not None:
                    patch.undo()
    except BaseException:
        with open(os.path.join(run_dir, f"{name}.rank{rank}.traceback"), "w") as out:
            out.write(traceback.format_exc())
        emit("end", snippet=name, ok=False, seconds=time.perf_counter() - started)
        # The other ranks may be blocked in a collective this rank will never join: end the launch,
        # the harness names this snippet and starts a new launch for the ones not yet run.
        emit.flush()
        os._exit(1)
    mutant = {"mutant_reached": patch.reached, "mutant_targets": patch.targets} if patch is not None else {}
    emit("end", snippet=name, ok=True, seconds=time.perf_counter() - started, state=world_state(), **mutant)


# The libraries a mutant may break. Their modules' attributes, and those of the classes they define, are
# what a mutant can change, through the patch API or by plain assignment.
LIBRARIES = {"torch", "accelerate", "transformers", "numpy", "tokenizers", "safetensors", "huggingface_hub"}
_MISSING = object()


class LibraryState:
    """Every attribute of every loaded library module and of the classes it defines (references only, about
    6,000 dictionaries once transformers is loaded). `restore()` puts back whatever code differs, however it
    was changed, so the next run starts from the library an isolated launch would see. Forking each mutant
    run instead cannot work: a snippet may hold the parent's process group (torch.distributed.nn's functions
    take group.WORLD as a default argument), whose gloo threads a fork does not have.

    Taken once per launch and kept up to date: copying 6,000 dictionaries before every mutant run cost 0.3 s
    to 1 s a run (255 s of a 501-run launch under load), while telling an unchanged dictionary from its copy
    is one pass at C speed (`map(operator.is_, ...)`)."""

    def __init__(self):
        self.saved = {}  # id(owner) -> (owner, its keys, its values), as after the last restore
        self.add_new_modules()

    def add_new_modules(self):
        """Modules imported since the last look (a run may import more of a library), and their classes."""
        for name, module in list(sys.modules.items()):
            if id(module) in self.saved or getattr(module, "__dict__", None) is None:
                continue
            if name.split(".")[0] in LIBRARIES:
                self.save(module)
                self.add_classes_of(module, name)

    def add_classes_of(self, module, name):
        for value in list(module.__dict__.values()):
            if isinstance(value, type) and id(value) not in self.saved and getattr(value, "__module__", None) == name:
                self.save(value)

    def save(self, owner):
        attributes = owner.__dict__
        self.saved[id(owner)] = (owner, tuple(attributes), tuple(attributes.values()))

    def restore(self) -> list[str]:
        """Puts back every changed piece of code (a function, method, class or descriptor) and every changed
        constant (an UPPER_CASE name: a default); returns their names ('torch.nn.Linear.forward'). The
        libraries' own running state (group counters, caches, lazily bound submodules) is left as it is:
        putting a counter back would make torch hand out a process-group name it has already used."""
        changed = []
        for owner, keys, values in list(self.saved.values()):
            now = owner.__dict__
            if len(now) == len(keys) and all(map(operator.is_, now.values(), values)) and tuple(now) == keys:
                continue
            before = dict(zip(keys, values))
            for key in [key for key in now if key not in before and is_code(key, now[key])]:
                changed.append(f"{qualified(owner)}.{key}")
                delattr(owner, key)
            for key, value in before.items():
                current = now.get(key, _MISSING)
                if current is not value and (is_code(key, value) or is_code(key, current)):
                    changed.append(f"{qualified(owner)}.{key}")
                    setattr(owner, key, value)
            self.save(owner)  # what is left (running state) is the next run's starting point
            if isinstance(owner, types.ModuleType):
                self.add_classes_of(owner, owner.__name__)
        self.add_new_modules()
        return changed


def is_code(name: str, value) -> bool:
    if isinstance(value, types.ModuleType) or value is _MISSING:
        return False
    return callable(value) or hasattr(type(value), "__get__") or name.isupper()


def qualified(owner) -> str:
    return getattr(owner, "__qualname__", None) and f"{owner.__module__}.{owner.__qualname__}" or owner.__name__


def main(manifest_path):
    with open(manifest_path) as manifest_file:
        manifest = json.load(manifest_file)
    run_dir = manifest["run_dir"]
    rank = int(os.environ.get("RANK", 0))

    faults = open(os.path.join(run_dir, f"rank{rank}.faults"), "w")
    faulthandler.enable(file=faults)  # a segfault or abort still names where it happened
    faulthandler.register(signal.SIGUSR1, file=faults, all_threads=True)  # the harness asks, before a kill

    status = open(os.path.join(run_dir, f"rank{rank}.status.jsonl"), "a", buffering=1)

    def emit(event, **fields):
        status.write(json.dumps({"event": event, "rank": rank, "pid": os.getpid(), "time": time.time(), **fields}) + "\n")

    emit.flush = status.flush

    Accelerator()  # the process group every snippet will share; gloo on CPU, NCCL on GPUs
    fresh = FreshProcess({os.path.dirname(snippet["path"]) for snippet in manifest["snippets"]})
    emit("ready", state=world_state())

    library = None  # taken before the first mutant run; a plain run after it makes it be taken again
    for number, snippet in enumerate(manifest["snippets"]):
        if dist.is_initialized():
            dist.barrier()  # no rank starts a snippet while another is still inside the previous one
        fresh.restore()
        if not snippet.get("mutant"):
            library = None
        elif library is None:
            library = LibraryState()
        run_snippet(snippet, run_dir, rank, emit)
        if snippet.get("mutant"):
            started = time.perf_counter()
            left = library.restore()  # a mutant that assigned directly (not through the patch API) is undone here
            if left:
                emit("restored", snippet=snippet["name"], attributes=left[:50], seconds=time.perf_counter() - started)
    if dist.is_initialized():
        dist.barrier()
    emit("done")
    status.close()
    if dist.is_initialized():
        dist.destroy_process_group()
    # torch's C++ teardown at interpreter exit sometimes aborts (SIGABRT) after all work is done;
    # every verdict is on disk by now, so leave without it.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
