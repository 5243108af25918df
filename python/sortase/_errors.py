"""The exceptions sortase raises: one class per kind of library error (``sortase::ErrorKind``)."""


class SortaseError(Exception):
    """Base class of every error a sortase job raises. The message names the file and the problem."""


class InputError(SortaseError, OSError):
    """An input cannot be opened or read (missing, unreadable, empty)."""


class FormatError(SortaseError, ValueError):
    """An input is not what it claims to be (malformed or truncated BAM/SAM/CRAM/FASTA)."""


class ArgumentError(SortaseError, ValueError):
    """An option or argument is invalid."""


class OutputError(SortaseError, OSError):
    """An output or temporary file cannot be written (disk full, permissions)."""


class CancelledError(SortaseError):
    """The job was cancelled."""


class InternalError(SortaseError):
    """A bug in sortase; please report it."""
