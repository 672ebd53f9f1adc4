//! The harness's one error type: every variant says what failed, on what, and what to do.
//! Missing host tools name the Debian packages to install, so a test that needs a guest fails with advice.

use std::path::PathBuf;

/// The packages the harness needs on the host (Debian names), in the form the advice prints them.
pub const INSTALL_ADVICE: &str = "apt-get install qemu-system-x86 busybox-static";

/// What can go wrong while preparing or running a guest.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A host tool or file the harness needs is not there.
    #[error("{what} not found ({detail}); install it: {INSTALL_ADVICE}")]
    Missing { what: String, detail: String },

    /// The apt index does not know the kernel metapackage (typically: no `apt-get update` yet).
    #[error("cannot resolve the guest kernel through apt ({detail}); run apt-get update (as root) and try again")]
    AptIndex { detail: String },

    /// A host command failed.
    #[error("{command} failed ({status}): {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },

    /// An I/O error on a named path.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The guest description is inconsistent (e.g. a distance matrix of the wrong size).
    #[error("invalid guest: {0}")]
    Invalid(String),

    /// The guest did not finish in time; `console` holds the end of its serial console, `hint`
    /// says so when the console shows the guest kernel itself stuck (soft lockup, RCU stall).
    #[error("guest {shape} timed out after {seconds} s running {command:?} (QEMU killed){hint}; last console lines:\n{console}")]
    Timeout {
        shape: String,
        seconds: u64,
        command: String,
        hint: String,
        console: String,
    },

    /// QEMU ended without the payload's exit marker (crash, kernel panic, bad QEMU arguments).
    #[error("guest {shape} ended without a result ({status}) running {command:?}; QEMU stderr: {stderr}; last console lines:\n{console}")]
    NoResult {
        shape: String,
        status: String,
        command: String,
        stderr: String,
        console: String,
    },
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// Result with the harness's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
