//! What can go wrong when programs are added to a simulator or their pages placed: a cpu, node
//! or process it does not have, or more processes than its caches can tell apart.

/// An error of [`crate::Simulator::spawn`] or [`crate::Simulator::place`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// More processes than a cache entry's address-space bits hold ([`crate::MAX_PROCESSES`]).
    #[error("too many processes for the simulator ({max} at most)")]
    TooManyProcesses {
        /// The most processes a simulation holds.
        max: usize,
    },
    /// A data policy or a placement names a node the machine does not have.
    #[error("no node {0}")]
    NoNode(u32),
    /// A thread names a cpu the machine does not have.
    #[error("thread {thread}: no cpu {cpu} on this machine")]
    NoCpu {
        /// The thread's name.
        thread: String,
        /// The cpu it names.
        cpu: u32,
    },
    /// No process with this pid.
    #[error("no process {0}")]
    NoProcess(u32),
}
