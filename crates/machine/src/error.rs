//! Errors of the machine crate: each says what failed, on what, and what to do.
//! Validation problems name the file and the field, as `file: field: problem`.

use std::fmt;
use std::path::PathBuf;

/// One problem found in a machine description, named by its field path in the machine file
/// (`node[1].cpus`, `distances[0][2]`, `cache[3].size`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldProblem {
    /// Field path as written in the machine file.
    pub field: String,
    /// What is wrong and, where it helps, what to write instead.
    pub problem: String,
}

impl FieldProblem {
    pub(crate) fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        FieldProblem {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for FieldProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

/// Everything that can go wrong while reading, writing, discovering or measuring a machine.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    /// A file could not be read or written.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// "read", "write", "create", ...
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid TOML, or has an unknown key or a value of the wrong type.
    #[error("{file}: {message}")]
    Parse {
        /// File name, or `<string>`.
        file: String,
        /// The parser's message (with line and column).
        message: String,
    },
    /// The description parsed but is not a consistent machine.
    #[error("{file}: invalid machine description:\n{}", problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// File name, or where the description came from.
        file: String,
        /// Each problem, by field.
        problems: Vec<FieldProblem>,
    },
    /// hwloc failed.
    #[error("hwloc could not {action}: {message}")]
    Hwloc {
        /// What numaff asked of hwloc.
        action: String,
        /// hwloc's answer and what to do.
        message: String,
    },
    /// A sysfs tree lacks what discovery needs.
    #[error("cannot read the machine from {}: {problem}", path.display())]
    Sysfs {
        /// The file or directory.
        path: PathBuf,
        /// What is missing or wrong.
        problem: String,
    },
    /// A `--machine` argument names nothing numaff knows.
    #[error("{0}")]
    Spec(String),
    /// Measuring latency or bandwidth failed.
    #[error("measurement failed: {0}")]
    Measure(String),
}

impl MachineError {
    /// The field problems of an [`MachineError::Invalid`], empty otherwise.
    pub fn problems(&self) -> &[FieldProblem] {
        match self {
            MachineError::Invalid { problems, .. } => problems,
            _ => &[],
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = MachineError> = std::result::Result<T, E>;
