# Written by gangrun (node/stacks.h, node/python/sitecustomize.py): the progress hook of a
# Python worker. It lets gangrun ask the process for its stacks (faulthandler on a signal),
# and, once the script imports torch.distributed, tells the node the rank's collective and
# optimizer step counts. Then it runs the sitecustomize that this one hides, if any.
#
# It must never change what the script does: every part catches its own errors, and the
# wrapped functions return what the originals return and raise what they raise.
import os as _gangrun_os
import sys as _gangrun_sys


def _gangrun_stacks():
    directory = _gangrun_os.environ.get("GANGRUN_STACK_DIR")
    signum = _gangrun_os.environ.get("GANGRUN_STACK_SIGNAL")
    if not directory or not signum:
        return
    try:
        import faulthandler
        with open("/proc/self/stat") as stat:
            started = stat.read().rsplit(")", 1)[1].split()[19]
        name = "%d.%s.stack" % (_gangrun_os.getpid(), started)
        stream = open(_gangrun_os.path.join(directory, name), "w")
        faulthandler.register(int(signum), file=stream, all_threads=True, chain=False)
        _gangrun_sys._gangrun_stack_stream = stream  # open for the process's whole life
        # Looking never hurts: the signal is taken by a thread of its own, which waits for
        # ever, so that no other thread's system call is interrupted by it. faulthandler's
        # handler has no SA_RESTART, and calls that are never restarted anyway (poll, connect
        # with a timeout: torch's TCPStore) failed with "Interrupted system call" when the
        # main thread took the signal. The thread starts with the signal unblocked; then
        # this (the main) thread blocks it, and so does every thread it starts later.
        import signal
        import threading
        ready = threading.Event()

        def take_stack_signals():
            ready.set()
            threading.Event().wait()

        threading.Thread(target=take_stack_signals, name="gangrun-stacks", daemon=True).start()
        ready.wait()
        signal.siginterrupt(int(signum), False)
        signal.pthread_sigmask(signal.SIG_BLOCK, {int(signum)})
    except Exception:
        pass


class _GangrunCounts:
    """The rank's counts. Written by the wrappers, read by the sender thread."""

    collectives = 0  # collectives and point-to-point calls issued (the rank's sequence number)
    steps = 0  # optimizer steps
    op = "-"  # the last collective's name
    inside = 0  # 1 while a blocking collective runs


# The collectives and point-to-point calls of torch.distributed that are counted.
_GANGRUN_COLLECTIVES = (
    "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "_all_gather_base",
    "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base", "reduce", "gather",
    "scatter", "all_to_all", "all_to_all_single", "barrier", "monitored_barrier",
    "all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list",
    "send", "recv", "isend", "irecv", "batch_isend_irecv", "all_reduce_coalesced",
    "all_gather_coalesced",
)


def _gangrun_progress():
    path = _gangrun_os.environ.get("GANGRUN_PROGRESS")
    if not path:
        return
    # The rank is the first Python process of the worker; a Python it starts (a data loader
    # spawned, a tool run with subprocess) inherits the variable and stays quiet.
    owner = _gangrun_os.environ.get("GANGRUN_HOOK_PID")
    if owner is None:
        _gangrun_os.environ["GANGRUN_HOOK_PID"] = str(_gangrun_os.getpid())
    elif owner != str(_gangrun_os.getpid()):
        return
    try:  # tells the node the hook is here (not progress: the script has done nothing yet)
        import _socket
        hello = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
        hello.setblocking(False)
        hello.sendto(b"hook", path)
        hello.close()
    except OSError:
        pass
    import threading

    counts = _GangrunCounts()
    local = threading.local()
    sender = []

    def send_loop():
        import socket
        import time
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setblocking(False)
        last = None
        while True:
            time.sleep(0.1)  # at most one datagram per 100 ms
            now = (counts.collectives, counts.steps, counts.op, counts.inside)
            if now == last:
                continue
            try:
                sock.sendto(("hook %d %d %s %d" % now).encode(), path)
                last = now
            except OSError:
                pass  # the node is gone or busy: tried again in 100 ms

    def start_sender():
        # Once torch.distributed is there; a forked child (a data loader worker) has no
        # thread of it, so it never reports as the rank.
        if not sender:
            sender.append(threading.Thread(target=send_loop, name="gangrun-progress",
                                           daemon=True))
            sender[0].start()

    def wrap_collective(name, function):
        import functools

        @functools.wraps(function)
        def collective(*args, **kwargs):
            if getattr(local, "depth", 0):
                return function(*args, **kwargs)  # called by another counted one
            local.depth = 1
            counts.collectives += 1
            counts.op = name
            counts.inside = 1
            try:
                return function(*args, **kwargs)
            finally:
                local.depth = 0
                counts.inside = 0

        collective._gangrun_counted = True
        return collective

    def patch_c10d(module):
        start_sender()
        for name in _GANGRUN_COLLECTIVES:
            function = getattr(module, name, None)
            if callable(function) and not getattr(function, "_gangrun_counted", False):
                setattr(module, name, wrap_collective(name, function))

    def count_step(*_):
        counts.steps += 1

    def patch_optimizer(module):
        start_sender()
        register = getattr(module, "register_optimizer_step_post_hook", None)
        if register is not None:  # torch 2.0 and later: a hook for every optimizer
            register(count_step)
            return
        optimizer = module.Optimizer  # torch 1.x: each optimizer class's step, wrapped once
        original_init = optimizer.__init__
        import functools

        def wrap_step(cls):
            step = cls.step
            if getattr(step, "_gangrun_counted", False):
                return

            @functools.wraps(step)
            def counted_step(self, *args, **kwargs):
                result = step(self, *args, **kwargs)
                counts.steps += 1
                return result

            counted_step._gangrun_counted = True
            cls.step = counted_step

        @functools.wraps(original_init)
        def init(self, *args, **kwargs):
            original_init(self, *args, **kwargs)
            try:
                wrap_step(type(self))
            except Exception:
                pass

        optimizer.__init__ = init

    def first_tensor_with_grad(value, depth=0):
        import torch
        if isinstance(value, torch.Tensor):
            return value if value.requires_grad else None
        if depth > 2:
            return None
        items = value.values() if isinstance(value, dict) else value
        if isinstance(value, (list, tuple, dict)):
            for item in items:
                found = first_tensor_with_grad(item, depth + 1)
                if found is not None:
                    return found
        return None

    def count_ddp_sync(*_):
        counts.collectives += 1
        counts.op = "ddp:all_reduce"

    def patch_ddp(module):
        start_sender()
        # DistributedDataParallel all-reduces gradients in C++ during backward, where no
        # Python function is called. A forward that will sync counts that collective when its
        # backward starts (a hook on its output's gradient), so that a rank stopped between
        # its forward and its backward is one behind the ranks waiting in the all-reduce;
        # an output with no gradient to hook counts at the forward, as before.
        ddp = module.DistributedDataParallel
        forward = ddp.forward
        import functools

        @functools.wraps(forward)
        def counted_forward(self, *args, **kwargs):
            syncs = False
            try:
                import torch
                syncs = (self.training and self.require_backward_grad_sync and
                         torch.is_grad_enabled())
            except Exception:
                pass
            output = forward(self, *args, **kwargs)
            if syncs:
                try:
                    tensor = first_tensor_with_grad(output)
                    if tensor is None:
                        count_ddp_sync()
                    else:
                        fired = []

                        def on_backward(grad):
                            if not fired:  # once, even when the graph is kept and run again
                                fired.append(True)
                                count_ddp_sync()
                            return grad

                        tensor.register_hook(on_backward)
                except Exception:
                    pass
            return output

        ddp.forward = counted_forward

    def say_checkpoint():
        # The counts first, so that the node knows the step the checkpoint holds; the same
        # socket keeps the two in order.
        try:
            import socket
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.setblocking(False)
            now = (counts.collectives, counts.steps, counts.op, counts.inside)
            sock.sendto(("hook %d %d %s %d" % now).encode(), path)
            sock.sendto(b"checkpoint", path)
            sock.close()
        except OSError:
            pass

    def wrap_save(function, to_path_only):
        import functools

        @functools.wraps(function)
        def save(*args, **kwargs):
            result = function(*args, **kwargs)
            try:
                # torch.save(obj, f): a file name is a checkpoint; a buffer (io.BytesIO) is not.
                target = args[1] if len(args) > 1 else kwargs.get("f")
                if not to_path_only or isinstance(target, (str, bytes, _gangrun_os.PathLike)):
                    say_checkpoint()
            except Exception:
                pass
            return result

        save._gangrun_counted = True
        return save

    def patch_torch(module):
        save = getattr(module, "save", None)
        if callable(save) and not getattr(save, "_gangrun_counted", False):
            module.save = wrap_save(save, to_path_only=True)

    def patch_checkpoint(module):
        # torch.distributed.checkpoint: save (2.x), save_state_dict (1.13); async_save (2.3+)
        # is told at its call, when the state it saves is taken.
        for name in ("save", "save_state_dict", "async_save"):
            function = getattr(module, name, None)
            if callable(function) and not getattr(function, "_gangrun_counted", False):
                setattr(module, name, wrap_save(function, to_path_only=False))

    patches = {
        "torch.distributed.distributed_c10d": patch_c10d,
        "torch.optim.optimizer": patch_optimizer,
        "torch.nn.parallel.distributed": patch_ddp,
        "torch": patch_torch,
        "torch.distributed.checkpoint": patch_checkpoint,
    }

    class Finder:
        """Applies a patch when its module has run, before anyone imports from it."""

        def find_spec(self, name, path=None, target=None):
            patch = patches.pop(name, None)
            if patch is None:
                return None
            try:
                return self.patched_spec(name, path, target, patch)
            except Exception:
                return None  # the import goes on as if the hook were not there

        def patched_spec(self, name, path, target, patch):
            if not patches:
                try:
                    _gangrun_sys.meta_path.remove(self)
                except ValueError:
                    pass
            spec = None
            for finder in _gangrun_sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    break
            loader = getattr(spec, "loader", None)
            exec_module = getattr(loader, "exec_module", None)
            if exec_module is None:
                return spec

            def patched_exec_module(module):
                exec_module(module)
                try:
                    patch(module)
                except Exception:
                    pass

            try:
                loader.exec_module = patched_exec_module
            except Exception:
                pass
            return spec

    for name in list(patches):
        module = _gangrun_sys.modules.get(name)
        if module is not None:  # imported already (by another sitecustomize or .pth)
            patches.pop(name)(module)
    if patches:
        _gangrun_sys.meta_path.insert(0, Finder())


def _gangrun_chain():
    import importlib.machinery
    import importlib.util
    here = _gangrun_os.path.dirname(_gangrun_os.path.abspath(__file__))
    path = [p for p in _gangrun_sys.path if _gangrun_os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    _gangrun_sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_gangrun_stacks()
try:
    _gangrun_progress()
except Exception:
    pass
_gangrun_chain()
