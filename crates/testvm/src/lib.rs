//! numaff's multi-node test world: boots a stock Debian kernel in QEMU (TCG) guests with N emulated
//! NUMA nodes and a busybox initramfs, runs one command there and hands back its output and status.
//!
//! ```no_run
//! use numaff_testvm::Guest;
//! let run = Guest::new(2, 2, 256)
//!     .distances(&[[10, 21], [21, 10]])
//!     .run(&["cat", "/sys/devices/system/node/online"])?;
//! assert_eq!(run.output.trim(), "0-1");
//! # Ok::<(), numaff_testvm::Error>(())
//! ```
//!
//! Needs `qemu-system-x86_64`, `/bin/busybox` from busybox-static and apt (for the kernel); when one
//! is missing, [`Guest::run`] fails with an error that says what to install.

pub mod error;
pub mod guest;
pub mod host;
pub mod initramfs;
pub mod kernel;

pub use error::{Error, Result, INSTALL_ADVICE};
pub use guest::{Guest, GuestRun};
pub use kernel::Kernel;
