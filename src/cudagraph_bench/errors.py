"""Small exception types. The CLI maps :class:`UsageError` (and subclasses) to exit code 2
with a one-line message; everything here is a plain ``Exception`` so library users can catch it."""


class CudagraphBenchError(Exception):
    """Base class of every error this package raises on purpose."""


class UsageError(CudagraphBenchError, ValueError):
    """Bad input from the user (option, file, request). The message says how to fix it. Exit code 2."""


class InputFileError(UsageError):
    """A run/baseline file is missing, empty, truncated or not the expected format."""


class FailedCheckError(UsageError):
    """The input runs recorded a failed correctness check, so they cannot be a reference (``baseline`` exits 1:
    readable runs, a wrong result); the message names the cases, checks and runs."""


class UnknownModelError(UsageError):
    """A model name is neither a preset nor a local ``from_pretrained`` directory with weights."""


class ShapeMismatchError(UsageError):
    """An input's shape or dtype differs from the static buffer captured in the graph."""


class RequestTooLongError(UsageError):
    """A prompt is longer than the largest bucket, or prompt + new tokens exceed the KV cache."""


class StaticBufferError(RuntimeError, CudagraphBenchError):
    """A static buffer baked into a captured graph was replaced or re-pointed (``data_ptr()`` changed): a replay
    would read/write the old address (the baked-pointer hazard); recapture instead."""


class CudaUnavailableError(CudagraphBenchError, RuntimeError):
    """The operation needs a CUDA GPU and ``torch.cuda.is_available()`` is False."""


class NotGraphableError(CudagraphBenchError, RuntimeError):
    """The model (or this case of it) cannot be captured correctly; raised up front, before any capture, with the
    reason in one line. The pytest suite records the case as skipped and goes on."""


class CaptureError(CudagraphBenchError, RuntimeError):
    """A CUDA graph capture failed (an operation the capture forbids: a host read of a GPU value, a copy
    from pageable memory, a synchronisation). The process's CUDA state was restored
    (:func:`cudagraph_bench.capture.graphed.recover_after_failed_capture`) unless ``context_usable`` is False."""

    def __init__(self, message: str, *, context_usable: bool = True):
        super().__init__(message)
        self.context_usable = context_usable


class OutputWriteError(CudagraphBenchError, OSError):
    """An output file could not be written (a full disk, a read-only folder): an ``OSError`` whose
    ``filename`` is the path the user gave, never the temporary file the atomic writer used."""


class CompileTimeout(CudagraphBenchError, TimeoutError):
    """A compilation (and the warm-up calls that trigger it) ran past its time limit
    (:func:`cudagraph_bench.capture.compiling.time_limit`); the message names the option that raises it."""


class CompileError(CudagraphBenchError, RuntimeError):
    """torch.compile did not compile the function it was given (dynamo disabled, or the function skipped):
    measuring it would label eager code as compiled. The message names the function and the fix."""
