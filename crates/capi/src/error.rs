//! Error codes of libnumaff (the NUMAFF_E* values of numaff.h) and their messages.

use std::fmt;

/// Success.
pub const OK: i32 = 0;
/// numaff_init has not been called (or numaff_final has).
pub const ENOTINIT: i32 = -1;
/// An argument is invalid (null array, zero size, a size that overflows, a bad option value).
pub const EINVAL: i32 = -2;
/// Memory could not be reserved (mmap failed) or a node has no room for the pages.
pub const ENOMEM: i32 = -3;
/// The pointer is not the start of an array allocated by numaff_alloc_*.
pub const ENOARRAY: i32 = -4;
/// A node or cpu given is not one of the machine's (as discovered) or is not allowed to this process.
pub const ENODE: i32 = -5;
/// A system call failed (the message of numaff_last_error says which, on what, and why).
pub const ESYS: i32 = -6;
/// The placement was applied but some pages are not where the policy puts them (busy, no memory).
pub const EPARTIAL: i32 = -7;
/// The machine's topology could not be discovered.
pub const ETOPO: i32 = -8;
/// An internal error (a bug in libnumaff); the program's data is left as it was.
pub const EINTERNAL: i32 = -9;

/// The text of an error code (the same strings as numaff_strerror).
pub fn strerror(code: i32) -> &'static str {
    match code {
        OK => "success",
        ENOTINIT => "numaff is not initialised: call numaff_init first",
        EINVAL => "invalid argument",
        ENOMEM => "out of memory",
        ENOARRAY => "not an array allocated by numaff_alloc_*",
        ENODE => "no such node or cpu on this machine",
        ESYS => "a system call failed",
        EPARTIAL => "some pages could not be placed",
        ETOPO => "the machine topology could not be discovered",
        EINTERNAL => "internal error in libnumaff",
        _ => "unknown error code",
    }
}

/// An error: its code and a message saying what failed, on what, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub code: i32,
    pub message: String,
}

impl Error {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, strerror(self.code))
    }
}

impl std::error::Error for Error {}

impl From<numaff_linux::LinuxError> for Error {
    fn from(e: numaff_linux::LinuxError) -> Self {
        Error::new(ESYS, e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, Error>;
