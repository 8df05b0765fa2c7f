"""Exception types; the CLI maps UsageError (and subclasses) to exit code 2 with a one-line message."""


class CudagraphBenchError(Exception):
    """Base class of every error this package raises on purpose."""


class UsageError(CudagraphBenchError, ValueError):
    """Bad input from the user (option, file, request). The message says how to fix it. Exit code 2."""


class InputFileError(UsageError):
    """A run/baseline file is missing, empty, truncated or not the expected format."""


class FailedCheckError(UsageError):
    """The input runs recorded a failed check, so they cannot be a reference (``baseline`` exits 1); names the cases."""


class UnknownModelError(UsageError):
    """A model name is neither a preset nor a local ``from_pretrained`` directory with weights."""


class CheckpointMismatchError(UnknownModelError):
    """A ``save_pretrained`` directory's weights do not fit the model its config.json builds (a hand-edited config)."""


class ShapeMismatchError(UsageError):
    """An input's shape or dtype differs from the static buffer captured in the graph."""


class RequestTooLongError(UsageError):
    """A prompt is longer than the largest bucket, or prompt + new tokens exceed the KV cache."""


class StaticBufferError(RuntimeError, CudagraphBenchError):
    """A static buffer of a captured graph was re-pointed: a replay would use the old address; recapture instead."""


class CudaUnavailableError(CudagraphBenchError, RuntimeError):
    """The operation needs a CUDA GPU and ``torch.cuda.is_available()`` is False."""


class NotGraphableError(CudagraphBenchError, RuntimeError):
    """The model (or case) cannot be captured correctly; raised before any capture. The suite skips the case."""


class CaptureError(CudagraphBenchError, RuntimeError):
    """A CUDA graph capture failed; the CUDA state was restored unless ``context_usable`` is False."""

    def __init__(self, message: str, *, context_usable: bool = True):
        super().__init__(message)
        self.context_usable = context_usable


class OutputWriteError(CudagraphBenchError, OSError):
    """An output file could not be written; ``filename`` is the path the user gave, never the temporary file."""


class CompileTimeout(CudagraphBenchError, TimeoutError):
    """A compilation and its warm-up calls ran past the time limit; the message names the option that sets it."""


class CompileError(CudagraphBenchError, RuntimeError):
    """torch.compile compiled nothing (dynamo disabled, or the function skipped); names the function and the fix."""
