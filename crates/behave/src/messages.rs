//! MPI message traces (002 §2.3.1): one row per point-to-point message (the messages a collective
//! is made of included), with its sender, receiver, size and time, as DeLocProf's monitoring
//! records them; read into [`CommEvent`]s for the same analysis as thread traces.
//!
//! The format is CSV with the header `time_ns,sender,receiver,bytes` (columns in any order, `#`
//! comments and blank lines allowed): `time_ns` in nanoseconds, `sender` and `receiver` the ranks
//! (in MPI_COMM_WORLD), `bytes` the message size.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::delocprof::CommEvent;
use crate::tracefile::{parse_int, read_csv_line, skip_csv_line, split_csv, TraceError};

/// The columns of a message trace.
pub const COLUMNS: [&str; 4] = ["time_ns", "sender", "receiver", "bytes"];

/// Most distinct ranks of a message trace: the ranks are the analysis's tasks, as threads are for
/// sample traces, so the same cap ([`crate::analyze::MAX_TRACE_THREADS`]): rank × rank matrices,
/// one per CommDyn interval, and a task order cubic in the ranks.
pub const MAX_RANKS: usize = crate::analyze::MAX_TRACE_THREADS;

/// Most messages [`read_messages`] holds (16 bytes each in memory: 8 GiB).
pub const MAX_MESSAGES: usize = 1 << 29;

fn open(path: &Path) -> Result<Box<dyn BufRead>, TraceError> {
    let file = File::open(path).map_err(|source| TraceError::Io {
        action: "open",
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Box::new(BufReader::new(file)))
}

/// The header of a CSV file (its first line that is not blank or a comment), or None.
fn header(
    lines: &mut Box<dyn BufRead>,
    path: &Path,
    line_no: &mut u64,
) -> Result<Option<Vec<String>>, TraceError> {
    while let Some(l) = read_csv_line(lines, path, line_no)? {
        if !skip_csv_line(&l) {
            return Ok(Some(split_csv(&l).map(str::to_string).collect()));
        }
    }
    Ok(None)
}

/// The column names of a CSV file's header (its first line that is not blank or a `#` comment),
/// or None for a file without one.
pub fn csv_header(path: &Path) -> Result<Option<Vec<String>>, TraceError> {
    let mut line_no = 0;
    header(&mut open(path)?, path, &mut line_no)
}

/// Whether `path` is a CSV message trace: its header names a `sender` column.
pub fn is_message_trace(path: &Path) -> Result<bool, TraceError> {
    let is_csv = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    if !is_csv {
        return Ok(false);
    }
    Ok(csv_header(path)?.is_some_and(|h| h.iter().any(|c| c == "sender")))
}

/// Reads a message trace. Errors name the line and what is wrong with it; a message from a rank
/// to itself is kept out of the communication matrix by the analysis, not refused here.
pub fn read_messages(path: &Path) -> Result<Vec<CommEvent>, TraceError> {
    read_messages_from(path, open(path)?)
}

/// As [`read_messages`], from a reader; `name` names it in errors.
pub fn read_messages_from(
    name: &Path,
    reader: impl std::io::Read + 'static,
) -> Result<Vec<CommEvent>, TraceError> {
    let path = name;
    let mut lines: Box<dyn BufRead> = Box::new(BufReader::new(reader));
    let mut line_no = 0;
    let mut ranks = std::collections::HashSet::new();
    let format = |message: String| TraceError::Format {
        path: path.to_path_buf(),
        message,
    };
    let names = header(&mut lines, path, &mut line_no)?
        .ok_or_else(|| format("empty: no header line time_ns,sender,receiver,bytes".into()))?;
    let mut index = [0usize; 4];
    for (k, col) in COLUMNS.iter().enumerate() {
        index[k] = names.iter().position(|n| n == col).ok_or_else(|| {
            format(format!(
                "no column {col} in the header {:?} (a message trace has time_ns,sender,receiver,bytes)",
                names.join(",")
            ))
        })?;
    }
    let mut out = Vec::new();
    while let Some(l) = read_csv_line(&mut lines, path, &mut line_no)? {
        if skip_csv_line(&l) {
            continue;
        }
        let row = |message: String| TraceError::Row {
            path: path.to_path_buf(),
            unit: "line",
            at: line_no,
            message,
        };
        let fields: Vec<&str> = split_csv(&l).collect();
        if fields.len() != names.len() {
            return Err(row(format!(
                "{} fields where the header has {}",
                fields.len(),
                names.len()
            )));
        }
        let time_ns: u64 = parse_int("time_ns", fields[index[0]]).map_err(row)?;
        let from: u32 = parse_int("sender", fields[index[1]]).map_err(row)?;
        let to: u32 = parse_int("receiver", fields[index[2]]).map_err(row)?;
        let bytes: u64 = parse_int("bytes", fields[index[3]]).map_err(row)?;
        ranks.insert(from);
        ranks.insert(to);
        if ranks.len() > MAX_RANKS {
            return Err(row(format!(
                "more than {MAX_RANKS} distinct ranks; the analysis is cubic in ranks and takes \
                 at most {MAX_RANKS}: analyse the messages of fewer ranks"
            )));
        }
        if out.len() >= MAX_MESSAGES {
            return Err(row(format!(
                "more than {MAX_MESSAGES} messages: split the trace"
            )));
        }
        out.push(CommEvent {
            time_ns,
            from: from as usize,
            to: to as usize,
            bytes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write");
        p
    }

    #[test]
    fn reads_messages_in_any_column_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = write(
            dir.path(),
            "m.csv",
            "# ranks of MPI_COMM_WORLD\nsender,receiver,bytes,time_ns\n0,1,4096,100\n\n1,0,0x10,200\n",
        );
        assert!(is_message_trace(&p).expect("readable"));
        let m = read_messages(&p).expect("reads");
        assert_eq!(
            m,
            vec![
                CommEvent {
                    time_ns: 100,
                    from: 0,
                    to: 1,
                    bytes: 4096
                },
                CommEvent {
                    time_ns: 200,
                    from: 1,
                    to: 0,
                    bytes: 16
                },
            ]
        );
    }

    #[test]
    fn more_ranks_than_the_cap_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::from("time_ns,sender,receiver,bytes\n");
        for r in 0..MAX_RANKS as u32 {
            text.push_str(&format!("{r},{r},{},8\n", r + 1));
        }
        let path = write(dir.path(), "m.csv", &text);
        let e = read_messages(&path).unwrap_err().to_string();
        assert!(
            e.contains(&format!("line {}", MAX_RANKS + 1))
                && e.contains("more than 1024 distinct ranks"),
            "{e}"
        );
    }

    #[test]
    fn bad_message_traces_name_the_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cases = [
            ("", "empty"),
            ("time_ns,sender,bytes\n", "no column receiver"),
            ("time_ns,sender,receiver,bytes\n1,2,3\n", "line 2: 3 fields"),
            (
                "time_ns,sender,receiver,bytes\n1,2,x,4\n",
                "line 2: receiver \"x\"",
            ),
            (
                "time_ns,sender,receiver,bytes\n1,-2,3,4\n",
                "line 2: sender",
            ),
            (
                "time_ns,sender,receiver,bytes\n1,5000000000,3,4\n",
                "sender 5000000000 is out of range",
            ),
        ];
        for (i, (text, want)) in cases.iter().enumerate() {
            let p = write(dir.path(), &format!("bad{i}.csv"), text);
            let e = read_messages(&p).expect_err(text).to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        // A sample trace is not a message trace.
        let p = write(dir.path(), "t.csv", "time_ns,pid,tid,cpu,node,addr,kind\n");
        assert!(!is_message_trace(&p).expect("readable"));
        assert!(!is_message_trace(Path::new("t.parquet")).expect("not csv"));
    }
}
