//! The communication matrix between tasks (kMAF's sharing matrix, DeLocProf's communication matrix):
//! a square, non-negative matrix, read from and written to CSV.

use std::fmt::Write as _;

/// Most tasks of a communication matrix read from CSV: each copy of the matrix is tasks² cells of
/// 8 bytes (128 MiB at 4096) and the mapping algorithms make several, some in cubic time, while the
/// papers' largest runs have 64 to 256 threads. A matrix beyond is refused from its first row, or
/// as soon as its rows exceed the cap.
pub const MAX_TASKS: usize = 4096;

/// The largest cell of a communication matrix read from CSV. Cells count bytes or events, and 1e18
/// (an exabyte) is far above any program's; with at most [`MAX_TASKS`]² cells, every sum, cost
/// and ratio computed from the matrix stays finite (1e308 cells summed to `inf`, then `NaN`).
pub const MAX_CELL: f64 = 1e18;

/// The bytes of one copy of an `n`-task matrix, in words ("128.0 MiB").
pub fn matrix_memory(n: usize) -> String {
    let bytes = (n as f64) * (n as f64) * 8.0;
    let mut v = bytes;
    for unit in ["B", "KiB", "MiB", "GiB", "TiB", "PiB"] {
        if v < 1024.0 || unit == "PiB" {
            return format!("{v:.1} {unit}");
        }
        v /= 1024.0;
    }
    format!("{bytes} B")
}

/// Why a communication matrix could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CommError {
    /// A cell is not a number, or is negative or not finite.
    #[error("{origin}: line {line}, column {column}: {problem}")]
    Cell {
        /// File name or `"<string>"`.
        origin: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        problem: String,
    },
    /// The rows do not form a square matrix.
    #[error("{origin}: {problem}")]
    Shape {
        /// File name or `"<string>"`.
        origin: String,
        /// What is wrong.
        problem: String,
    },
}

/// A square matrix of communication amounts between tasks; `get(i, j)` is what task `i` and task
/// `j` exchanged (events, bytes or shared accesses, depending on the source).
///
/// Next to the `n²` cells it keeps a bitmap of the cells that may hold something other than
/// `+0.0` (a bit per cell, set when such a value is stored, never cleared: `n² / 8` bytes, 1/64 of
/// the cells), so that building the sparse graph of a sparse matrix reads only those cells instead
/// of scanning all of them (the mapping-time goal: ≤ 5 ms at 1024 threads).
#[derive(Debug, Clone)]
pub struct CommMatrix {
    n: usize,
    data: Vec<f64>,
    /// Bit `j % 64` of word `i * ⌈n / 64⌉ + j / 64`: cell `(i, j)` may hold a value other than
    /// `+0.0`. A cell whose bits are not all zero always has its bit set.
    nz: Vec<u64>,
}

/// Equal when the sizes and every cell are equal (the non-zero bitmap is not compared: a cell set
/// back to `0.0` stays marked).
impl PartialEq for CommMatrix {
    fn eq(&self, other: &Self) -> bool {
        self.n == other.n && self.data == other.data
    }
}

/// The error of a matrix with more than [`MAX_TASKS`] rows or cells in a row (`at_least` of them);
/// `what` says which ("line 3 has more than 4096 cells").
pub fn too_many(origin: &str, what: String, at_least: usize) -> CommError {
    CommError::Shape {
        origin: origin.to_string(),
        problem: format!(
            "{what} (at least {at_least}): a matrix of {at_least} tasks would need {} per copy; numaff map takes at most {MAX_TASKS} tasks \
             ({} per copy): map fewer tasks (e.g. group threads into processes)",
            matrix_memory(at_least),
            matrix_memory(MAX_TASKS)
        ),
    }
}

impl CommMatrix {
    /// An all-zero matrix for `n` tasks.
    pub fn new(n: usize) -> Self {
        CommMatrix {
            n,
            data: vec![0.0; n * n],
            nz: vec![0; n * n.div_ceil(64)],
        }
    }

    /// Builds a matrix from rows; `None` if they are not square.
    pub fn from_rows(rows: &[Vec<f64>]) -> Option<Self> {
        let n = rows.len();
        if rows.iter().any(|r| r.len() != n) {
            return None;
        }
        let mut m = CommMatrix::new(n);
        for (i, r) in rows.iter().enumerate() {
            for (j, &v) in r.iter().enumerate() {
                m.set(i, j, v);
            }
        }
        Some(m)
    }

    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there is no task.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Communication between tasks `i` and `j`.
    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.n + j]
    }

    /// Row `i`: what task `i` sent to every task.
    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.n..(i + 1) * self.n]
    }

    /// The common value of every off-diagonal cell when they are all equal (a uniform all-to-all
    /// matrix, or an all-zero one); `None` otherwise. Stops at the first cell that differs, so a
    /// non-uniform matrix usually costs a few cells, a uniform one a single scan.
    pub fn uniform_value(&self) -> Option<f64> {
        let n = self.n;
        if n < 2 {
            return None;
        }
        let v = self.get(0, 1);
        for i in 0..n {
            let row = self.row(i);
            if row[..i].iter().any(|&x| x != v) || row[i + 1..].iter().any(|&x| x != v) {
                return None;
            }
        }
        Some(v)
    }

    /// Sets the communication between `i` and `j` (one direction).
    pub fn set(&mut self, i: usize, j: usize, v: f64) {
        self.data[i * self.n + j] = v;
        self.mark(i, j);
    }

    /// Adds `v` to both directions between `i` and `j`.
    pub fn add_pair(&mut self, i: usize, j: usize, v: f64) {
        self.data[i * self.n + j] += v;
        self.mark(i, j);
        if i != j {
            self.data[j * self.n + i] += v;
            self.mark(j, i);
        }
    }

    /// Marks cell `(i, j)` in the non-zero bitmap when it is not `+0.0`.
    fn mark(&mut self, i: usize, j: usize) {
        if self.data[i * self.n + j].to_bits() != 0 {
            self.nz[i * self.n.div_ceil(64) + j / 64] |= 1u64 << (j % 64);
        }
    }

    /// The columns `j` of row `i` whose cell may hold a value other than `+0.0`, in increasing
    /// order; every other cell of the row is `+0.0`.
    pub(crate) fn nonzero_columns(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let words = self.n.div_ceil(64);
        self.nz[i * words..(i + 1) * words]
            .iter()
            .enumerate()
            .flat_map(|(k, &word)| {
                let mut w = word;
                std::iter::from_fn(move || {
                    (w != 0).then(|| {
                        let b = w.trailing_zeros() as usize;
                        w &= w - 1;
                        k * 64 + b
                    })
                })
            })
    }

    /// The symmetric matrix (m + mᵀ) / 2: mapping algorithms treat communication as undirected.
    pub fn symmetrized(&self) -> Self {
        let mut out = CommMatrix::new(self.n);
        for i in 0..self.n {
            for j in 0..self.n {
                out.set(i, j, (self.get(i, j) + self.get(j, i)) / 2.0);
            }
        }
        out
    }

    /// Total communication of task `i` with the others.
    pub fn row_sum(&self, i: usize) -> f64 {
        (0..self.n)
            .filter(|&j| j != i)
            .map(|j| self.get(i, j))
            .sum()
    }

    /// Reads CSV: one row per line, cells separated by commas (or whitespace); blank lines and lines
    /// starting with `#` are skipped. Every cell must be a finite, non-negative number.
    pub fn from_csv(text: &str, origin: &str) -> Result<Self, CommError> {
        let mut rows = Vec::new();
        for (ln, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut row = Vec::new();
            let cells = line
                .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
                .filter(|c| !c.is_empty());
            for (col, cell) in cells.enumerate() {
                let bad = |problem: String| CommError::Cell {
                    origin: origin.to_string(),
                    line: ln + 1,
                    column: col + 1,
                    problem,
                };
                let v: f64 = cell
                    .parse()
                    .map_err(|_| bad(format!("{cell:?} is not a number")))?;
                if !v.is_finite() || v < 0.0 {
                    return Err(bad(format!("{cell} is negative or not finite")));
                }
                if v > MAX_CELL {
                    return Err(bad(format!(
                        "{cell} is larger than {MAX_CELL:e}, the largest cell numaff takes (sums \
                         of such cells overflow); scale the matrix down (only ratios matter)"
                    )));
                }
                if col >= MAX_TASKS {
                    return Err(too_many(
                        origin,
                        format!("line {} has more than {MAX_TASKS} cells", ln + 1),
                        col + 1,
                    ));
                }
                row.push(v);
            }
            if rows.len() >= MAX_TASKS {
                return Err(too_many(
                    origin,
                    format!("more than {MAX_TASKS} rows"),
                    rows.len() + 1,
                ));
            }
            rows.push((ln + 1, row));
        }
        let n = rows.len();
        if n == 0 {
            return Err(CommError::Shape {
                origin: origin.to_string(),
                problem: "no rows; give one row of numbers per task".into(),
            });
        }
        for (line, row) in &rows {
            if row.len() != n {
                return Err(CommError::Shape {
                    origin: origin.to_string(),
                    problem: format!("line {line} has {} cells but there are {n} rows; the matrix must be square", row.len()),
                });
            }
        }
        let rows: Vec<Vec<f64>> = rows.into_iter().map(|(_, r)| r).collect();
        CommMatrix::from_rows(&rows).ok_or_else(|| CommError::Shape {
            origin: origin.to_string(),
            problem: "not square".into(),
        })
    }

    /// Writes CSV, one row per line.
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        for i in 0..self.n {
            let row: Vec<String> = (0..self.n).map(|j| format!("{}", self.get(i, j))).collect();
            let _ = writeln!(out, "{}", row.join(","));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_round_trip_and_errors() {
        let m = CommMatrix::from_csv("# pairs\n0,5,0\n5,0,1\n0 1 0\n", "m.csv").unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m.get(0, 1), 5.0);
        assert_eq!(CommMatrix::from_csv(&m.to_csv(), "again").unwrap(), m);
        let e = CommMatrix::from_csv("0,1\n1,x\n", "m.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("m.csv: line 2, column 2"), "{e}");
        let e = CommMatrix::from_csv("0,1\n1\n", "m.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2 has 1 cells"), "{e}");
        assert!(CommMatrix::from_csv("0,-1\n1,0\n", "m").is_err());
        assert!(CommMatrix::from_csv("", "m").is_err());
    }

    #[test]
    fn csv_beyond_the_caps_is_refused() {
        let e = CommMatrix::from_csv("0,1e308\n1e308,0\n", "m.csv")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("m.csv: line 1, column 2: 1e308 is larger than 1e18"),
            "{e}"
        );
        assert!(CommMatrix::from_csv("0,1e18\n1e18,0\n", "m").is_ok());
        let wide = vec!["0"; MAX_TASKS + 1].join(",");
        let e = CommMatrix::from_csv(&wide, "m.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1 has more than 4096 cells"), "{e}");
        let tall = "0\n".repeat(MAX_TASKS + 1);
        let e = CommMatrix::from_csv(&tall, "m.csv")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("more than 4096 rows (at least 4097)") && e.contains("128.0 MiB"),
            "{e}"
        );
    }

    #[test]
    fn symmetrize_and_sums() {
        let mut m = CommMatrix::new(2);
        m.set(0, 1, 4.0);
        let s = m.symmetrized();
        assert_eq!(s.get(1, 0), 2.0);
        assert_eq!(s.row_sum(0), 2.0);
    }
}
