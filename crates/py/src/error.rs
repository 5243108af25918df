//! Library errors → Python exceptions, in one function (the orphan rule forbids
//! `impl From<sortase::Error> for PyErr` here).
//!
//! The classes live in `sortase/_errors.py`, where they can have two bases (`InputError` is also an
//! `OSError`, `ArgumentError` a `ValueError`), which classes made from Rust cannot.

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use sortase::ErrorKind;

/// The `sortase` exception for `e`: its class by kind, its message the library's (which names the
/// file).
pub fn to_py_err(py: Python<'_>, e: sortase::Error) -> PyErr {
    let class = match e.kind() {
        ErrorKind::Input => "InputError",
        ErrorKind::Format => "FormatError",
        ErrorKind::Argument => "ArgumentError",
        ErrorKind::Output => "OutputError",
        ErrorKind::Cancelled => "CancelledError",
        ErrorKind::Internal => "InternalError",
    };
    raise(py, class, &e.to_string())
}

/// An exception of class `class` of `sortase._errors` with `message`.
pub fn raise(py: Python<'_>, class: &str, message: &str) -> PyErr {
    let made = (|| -> PyResult<PyErr> {
        let class = py.import("sortase._errors")?.getattr(class)?;
        let args = PyTuple::new(py, [message])?;
        Ok(PyErr::from_value(class.call1(args)?))
    })();
    made.unwrap_or_else(|e| e)
}
