"""Small exception types. The CLI maps :class:`UsageError` (and subclasses) to exit code 2
with a one-line message; everything here is a plain ``Exception`` so library users can catch it."""


class CudagraphBenchError(Exception):
    """Base class of every error this package raises on purpose."""


class UsageError(CudagraphBenchError, ValueError):
    """Bad input from the user (option, file, request). The message says how to fix it. Exit code 2."""


class InputFileError(UsageError):
    """A run/baseline file is missing, empty, truncated or not the expected format."""


class UnknownModelError(UsageError):
    """A model name is neither a preset nor a local ``from_pretrained`` directory with weights."""


class ShapeMismatchError(UsageError):
    """An input's shape or dtype differs from the static buffer captured in the graph."""


class RequestTooLongError(UsageError):
    """A prompt is longer than the largest bucket, or prompt + new tokens exceed the KV cache."""


class StaticBufferError(RuntimeError, CudagraphBenchError):
    """A static buffer baked into a captured graph was replaced or re-pointed (``data_ptr()`` changed).

    Replaying would read/write the old address (the baked-pointer hazard); recapture instead."""


class CudaUnavailableError(CudagraphBenchError, RuntimeError):
    """The operation needs a CUDA GPU and ``torch.cuda.is_available()`` is False."""
