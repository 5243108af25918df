//! The library's error: a kind a caller can act on (the Python package maps it to an exception
//! class, the CLI to an exit code) and a message that names the file and the problem.
//!
//! Inside the facade, job code adds context as it goes (`anyhow`'s `context`, which reads well in
//! long drivers); at the job's edge [`Error::from`] classifies the chain once: an explicit kind
//! attached with [`Error::new`] wins, then the typed errors of the lower crates (a malformed record
//! is [`ErrorKind::Format`], a missing file [`ErrorKind::Input`]), then I/O. The message is the whole
//! chain joined by ": ", exactly what `sortase` has always printed.

use std::fmt;

/// What kind of failure an [`Error`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ErrorKind {
    /// An input cannot be opened or read (missing, unreadable, empty).
    Input,
    /// An input is not what it claims to be (malformed BAM/SAM/CRAM/FASTA/VCF, truncated file).
    Format,
    /// An option or argument is invalid.
    Argument,
    /// An output or temporary file cannot be written (disk full, permissions).
    Output,
    /// The job was cancelled ([`crate::Runtime::cancel`], Ctrl-C).
    Cancelled,
    /// A bug.
    Internal,
}

/// An error of a sortase job.
pub struct Error {
    kind: ErrorKind,
    inner: anyhow::Error,
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A kind attached to a message inside a chain, found again when the chain is classified.
#[derive(Debug)]
struct Kinded {
    kind: ErrorKind,
    message: String,
}

impl fmt::Display for Kinded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Kinded {}

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            kind,
            inner: anyhow::Error::new(Kinded { kind, message }),
        }
    }

    /// An invalid option or argument.
    pub fn argument(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Argument, message)
    }

    /// The job was cancelled.
    pub fn cancelled() -> Self {
        Self::new(ErrorKind::Cancelled, "interrupted")
    }

    /// The kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Whether writing failed because the reader went away (`sortase view | head`), which the CLI
    /// does not report.
    pub fn is_broken_pipe(&self) -> bool {
        self.inner.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        })
    }

    /// Adds context in front of the message, keeping the kind.
    pub fn context(self, context: impl fmt::Display + Send + Sync + 'static) -> Self {
        Self {
            kind: self.kind,
            inner: self.inner.context(context),
        }
    }

    /// The error as an `anyhow` chain (for callers that add more context).
    pub fn into_anyhow(self) -> anyhow::Error {
        self.inner
    }
}

fn classify(e: &anyhow::Error) -> ErrorKind {
    for c in e.chain() {
        if let Some(k) = c.downcast_ref::<Kinded>() {
            return k.kind;
        }
        if let Some(k) = c.downcast_ref::<Error>() {
            return k.kind;
        }
    }
    for c in e.chain() {
        if let Some(s) = c.downcast_ref::<sortase_sort::SortError>() {
            return match s {
                sortase_sort::SortError::Cancelled => ErrorKind::Cancelled,
                sortase_sort::SortError::Temp { .. } => ErrorKind::Output,
                sortase_sort::SortError::Output(_) => ErrorKind::Output,
                sortase_sort::SortError::Input(_) | sortase_sort::SortError::Unordered(_) => {
                    ErrorKind::Format
                }
                sortase_sort::SortError::CorruptRun { .. }
                | sortase_sort::SortError::Internal(_) => ErrorKind::Internal,
            };
        }
        if let Some(b) = c.downcast_ref::<sortase_bam::BamError>() {
            return match b {
                sortase_bam::BamError::Io(io) => io_kind(io),
                _ => ErrorKind::Format,
            };
        }
        if c.downcast_ref::<sortase_bgzf::BgzfError>().is_some() {
            return ErrorKind::Format;
        }
        if let Some(a) = c.downcast_ref::<sortase_agd::AgdError>() {
            return match a {
                sortase_agd::AgdError::Io { source, .. } => io_kind(source),
                sortase_agd::AgdError::MissingChunk { .. } => ErrorKind::Input,
                sortase_agd::AgdError::Write(_) => ErrorKind::Output,
                _ => ErrorKind::Format,
            };
        }
        if let Some(f) = c.downcast_ref::<sortase_ops::filter::FilterError>() {
            return match f {
                sortase_ops::filter::FilterError::Io { source, .. } => io_kind(source),
                _ => ErrorKind::Argument,
            };
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return io_kind(io);
        }
    }
    ErrorKind::Internal
}

fn io_kind(io: &std::io::Error) -> ErrorKind {
    use std::io::ErrorKind as K;
    match io.kind() {
        K::NotFound | K::PermissionDenied | K::IsADirectory => ErrorKind::Input,
        K::UnexpectedEof | K::InvalidData => ErrorKind::Format,
        K::Interrupted => ErrorKind::Cancelled,
        _ => ErrorKind::Output,
    }
}

impl From<anyhow::Error> for Error {
    fn from(inner: anyhow::Error) -> Self {
        // anyhow's `downcast` also reaches through context layers and would drop them: unwrap only
        // an `Error` that nothing was added to.
        if inner.chain().count() == 1 && inner.is::<Error>() {
            if let Ok(e) = inner.downcast::<Error>() {
                return e;
            }
            unreachable!("checked with is::<Error>()");
        }
        Self {
            kind: classify(&inner),
            inner,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        anyhow::Error::new(e).into()
    }
}

impl From<sortase_sort::SortError> for Error {
    fn from(e: sortase_sort::SortError) -> Self {
        anyhow::Error::new(e).into()
    }
}

impl From<sortase_bam::BamError> for Error {
    fn from(e: sortase_bam::BamError) -> Self {
        anyhow::Error::new(e).into()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.inner)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {:#}", self.kind, self.inner)
    }
}

impl std::error::Error for Error {}

/// Returns early with an [`ErrorKind::Argument`] error (formatted like `format!`).
#[doc(hidden)]
#[macro_export]
macro_rules! bail_argument {
    ($($t:tt)*) => {
        return Err($crate::error::Error::argument(format!($($t)*)).into())
    };
}
#[doc(hidden)]
pub use crate::bail_argument;

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn kinds_survive_context_and_messages_join_the_chain() {
        let e: anyhow::Error = Error::argument("-m 1K is too small").into();
        let e = Error::from(e.context("sort"));
        assert_eq!(e.kind(), ErrorKind::Argument);
        assert_eq!(e.to_string(), "sort: -m 1K is too small");
        let io = std::fs::File::open("/nonexistent/x.bam").context("/nonexistent/x.bam");
        let e = Error::from(io.unwrap_err());
        assert_eq!(e.kind(), ErrorKind::Input);
        assert!(e.to_string().starts_with("/nonexistent/x.bam: "));
        let e = Error::from(anyhow::Error::new(sortase_sort::SortError::Cancelled));
        assert_eq!(e.kind(), ErrorKind::Cancelled);
    }
}
