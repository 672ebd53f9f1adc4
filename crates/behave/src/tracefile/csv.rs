//! CSV trace files (import and export): a header line naming the columns, no metadata; readers
//! accept the columns in any order, addresses in hex, blank lines and `#` comments.

use std::fs::File;
use std::io::{BufRead, BufWriter, Read, Write};
use std::path::Path;

use super::schema::COLUMNS;
use super::{Format, Sink, Source, TraceError, TraceReader, BATCH_ROWS};
use crate::sample::{shorten, Sample, TraceMeta};

/// The longest CSV line accepted (a guard against reading a binary file line by line).
const MAX_CSV_LINE: usize = 4096;

/// A CSV reader's position and column layout.
pub(super) struct CsvState {
    lines: Box<dyn BufRead>,
    line_no: u64,
    /// Column index of each of [`COLUMNS`] in the file, if present.
    index: [Option<usize>; 9],
    width: usize,
    done: bool,
}

/// The CSV sink of a new trace at `tmp` (renamed to `path` when finished), its header written. On
/// error the temporary file is removed.
pub(super) fn sink(file: File, path: &Path) -> Result<Sink, TraceError> {
    let mut w = BufWriter::new(file);
    let header = COLUMNS.join(",");
    if let Err(e) = writeln!(w, "{header}") {
        return Err(TraceError::Io {
            action: "write",
            path: path.to_path_buf(),
            source: e,
        });
    }
    Ok(Sink::Csv(w))
}

/// Writes one sample as a CSV line.
pub(super) fn write_row(w: &mut BufWriter<File>, s: &Sample) -> std::io::Result<()> {
    let opt = |v: Option<String>| v.unwrap_or_default();
    writeln!(
        w,
        "{},{},{},{},{},{},{},{},{}",
        s.time_ns,
        s.pid,
        s.tid,
        s.cpu,
        s.node,
        s.addr,
        s.kind,
        opt(s.latency_ns.map(|l| l.to_string())),
        opt(s.data_source.map(|d| d.to_string()))
    )
}

impl TraceReader {
    pub(super) fn from_csv(path: &Path, mut lines: Box<dyn BufRead>) -> Result<Self, TraceError> {
        let mut line_no = 0;
        let header = loop {
            match read_csv_line(&mut lines, path, &mut line_no)? {
                None => {
                    return Err(TraceError::Format {
                        path: path.to_path_buf(),
                        message: "empty file: no header line".into(),
                    })
                }
                Some(l) if skip_csv_line(&l) => continue,
                Some(l) => break l,
            }
        };
        let names: Vec<String> = split_csv(&header).map(str::to_string).collect();
        let mut index = [None; 9];
        for (i, col) in COLUMNS.iter().enumerate() {
            index[i] = names.iter().position(|n| n == col);
            if index[i].is_none() && i < 7 && crate::perf_script::looks_like(&header) {
                return Err(TraceError::Format {
                    path: path.to_path_buf(),
                    message: format!(
                        "this is `perf script` text, not a trace: convert it with `numaff profile \
                         --import {} -o trace.parquet` (which maps its cpus to this machine's nodes)",
                        path.display()
                    ),
                });
            }
            if index[i].is_none() && i < 7 {
                return Err(TraceError::Row {
                    path: path.to_path_buf(),
                    unit: "line",
                    at: line_no,
                    message: format!(
                        "the header has no column {col} (a trace has columns {}; is this a trace?)",
                        COLUMNS.join(",")
                    ),
                });
            }
        }
        Ok(TraceReader {
            path: path.to_path_buf(),
            format: Format::Csv,
            meta: TraceMeta::default(),
            rows: None,
            source: Source::Csv(Box::new(CsvState {
                lines,
                line_no,
                index,
                width: names.len(),
                done: false,
            })),
            row: 0,
            failed: false,
        })
    }

    pub(super) fn next_csv(&mut self) -> Option<Result<Vec<Sample>, TraceError>> {
        let Source::Csv(st) = &mut self.source else {
            return None;
        };
        if st.done {
            return None;
        }
        let mut out = Vec::with_capacity(1024);
        while out.len() < BATCH_ROWS {
            let line = match read_csv_line(&mut st.lines, &self.path, &mut st.line_no) {
                Err(e) => return Some(Err(e)),
                Ok(None) => {
                    st.done = true;
                    break;
                }
                Ok(Some(l)) => l,
            };
            if skip_csv_line(&line) {
                continue;
            }
            match parse_csv_row(&line, &st.index, st.width) {
                Ok(s) => out.push(s),
                Err(message) => {
                    return Some(Err(TraceError::Row {
                        path: self.path.clone(),
                        unit: "line",
                        at: st.line_no,
                        message,
                    }))
                }
            }
        }
        self.row += out.len() as u64;
        if out.is_empty() {
            None
        } else {
            Some(Ok(out))
        }
    }
}

/// Reads one line (without its end), at most [`MAX_CSV_LINE`] bytes; `None` at the end.
pub(crate) fn read_csv_line(
    r: &mut Box<dyn BufRead>,
    path: &Path,
    line_no: &mut u64,
) -> Result<Option<String>, TraceError> {
    let mut buf = Vec::new();
    let n = r
        .by_ref()
        .take(MAX_CSV_LINE as u64 + 1)
        .read_until(b'\n', &mut buf)
        .map_err(|source| TraceError::Io {
            action: "read",
            path: path.to_path_buf(),
            source,
        })?;
    if n == 0 {
        return Ok(None);
    }
    *line_no += 1;
    let err = |message: String| TraceError::Row {
        path: path.to_path_buf(),
        unit: "line",
        at: *line_no,
        message,
    };
    if buf.last() == Some(&b'\n') {
        buf.pop();
    } else if buf.len() > MAX_CSV_LINE {
        return Err(err(format!(
            "line longer than {MAX_CSV_LINE} bytes (is this a CSV trace?)"
        )));
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| err("not UTF-8 text (is this a CSV trace?)".into()))
}

pub(crate) fn skip_csv_line(l: &str) -> bool {
    let t = l.trim();
    t.is_empty() || t.starts_with('#')
}

/// Fields of a CSV line, trimmed, with surrounding double quotes removed.
pub(crate) fn split_csv(line: &str) -> impl Iterator<Item = &str> {
    line.split(',').map(|f| {
        let f = f.trim();
        f.strip_prefix('"')
            .and_then(|g| g.strip_suffix('"'))
            .unwrap_or(f)
    })
}

pub(crate) fn parse_int<T: TryFrom<u64>>(name: &str, v: &str) -> Result<T, String> {
    let parsed = if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
    } else {
        v.parse::<u64>()
    };
    let bad = || format!("{name} {:?} is not a non-negative integer", shorten(v));
    let n = parsed.map_err(|_| bad())?;
    T::try_from(n).map_err(|_| format!("{name} {n} is out of range"))
}

fn parse_csv_row(line: &str, index: &[Option<usize>; 9], width: usize) -> Result<Sample, String> {
    let fields: Vec<&str> = split_csv(line).collect();
    if fields.len() != width {
        return Err(format!("{} fields, the header has {width}", fields.len()));
    }
    let get = |i: usize| index[i].map(|j| fields[j]);
    let req = |i: usize| -> Result<&str, String> {
        match get(i) {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(format!("{} is empty", COLUMNS[i])),
        }
    };
    Ok(Sample {
        time_ns: parse_int("time_ns", req(0)?)?,
        pid: parse_int("pid", req(1)?)?,
        tid: parse_int("tid", req(2)?)?,
        cpu: parse_int("cpu", req(3)?)?,
        node: parse_int("node", req(4)?)?,
        addr: parse_int("addr", req(5)?)?,
        kind: req(6)?.parse()?,
        latency_ns: match get(7) {
            Some(v) if !v.is_empty() => Some(parse_int("latency_ns", v)?),
            _ => None,
        },
        data_source: match get(8) {
            Some(v) if !v.is_empty() => Some(v.parse()?),
            _ => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::samples;
    use super::super::write_trace;
    use super::*;
    use crate::sample::Kind;

    #[test]
    fn csv_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        let s = samples(500);
        write_trace(&path, &TraceMeta::default(), &s).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(
            "time_ns,pid,tid,cpu,node,addr,kind,latency_ns,data_source\n1000,100,100,0,0,"
        ));
        let r = TraceReader::open(&path).unwrap();
        assert_eq!(r.format(), Format::Csv);
        assert_eq!(r.read_all().unwrap(), s);
    }

    #[test]
    fn csv_accepts_reordered_columns_hex_comments_and_missing_optionals() {
        let text = "# from perf\nkind,addr,tid,pid,cpu,node,time_ns\n\nload,0x1000,5,5,1,0,7\n\"store\",4096,6,5,2,1,8\n";
        let r =
            TraceReader::from_csv_reader(Path::new("x.csv"), std::io::Cursor::new(text)).unwrap();
        let s = r.read_all().unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].addr, s[0].kind, s[0].latency_ns),
            (0x1000, Kind::Load, None)
        );
        assert_eq!((s[1].tid, s[1].kind, s[1].node), (6, Kind::Store, 1));
    }

    fn csv_err(text: &'static str) -> String {
        match TraceReader::from_csv_reader(Path::new("bad.csv"), std::io::Cursor::new(text)) {
            Err(e) => e.to_string(),
            Ok(r) => r.read_all().unwrap_err().to_string(),
        }
    }

    #[test]
    fn perf_script_text_is_told_apart_and_sent_to_import() {
        let e = csv_err("pf 19098/19102 [001] 10868.447952: page-faults:u:     7f26dc0b4000\n");
        assert!(
            e.starts_with("bad.csv is not a numaff trace: this is `perf script` text"),
            "{e}"
        );
        assert!(e.contains("numaff profile --import bad.csv"), "{e}");
    }

    #[test]
    fn csv_errors_name_the_file_and_line() {
        assert_eq!(
            csv_err(""),
            "bad.csv is not a numaff trace: empty file: no header line"
        );
        assert!(
            csv_err("a,b\n1,2\n").starts_with("bad.csv, line 1: the header has no column time_ns")
        );
        let h = "time_ns,pid,tid,cpu,node,addr,kind\n";
        let e = csv_err(Box::leak(
            format!("{h}1,2,3,4,5,6,load\n1,2,3,4,5,6,jump\n").into_boxed_str(),
        ));
        assert_eq!(
            e,
            "bad.csv, line 3: unknown kind \"jump\" (expected fault, load or store)"
        );
        let e = csv_err(Box::leak(
            format!("{h}1,2,3,4,5,-6,load\n").into_boxed_str(),
        ));
        assert_eq!(
            e,
            "bad.csv, line 2: addr \"-6\" is not a non-negative integer"
        );
        let e = csv_err(Box::leak(format!("{h}1,2,3,4,5,6\n").into_boxed_str()));
        assert_eq!(e, "bad.csv, line 2: 6 fields, the header has 7");
        let e = csv_err(Box::leak(
            format!("{h}1,2,3,4,99999999999,6,load\n").into_boxed_str(),
        ));
        assert_eq!(e, "bad.csv, line 2: node 99999999999 is out of range");
        let long = Box::leak(format!("{h}{}\n", "1".repeat(10_000)).into_boxed_str());
        assert!(csv_err(long).contains("line 2: line longer than"));
        let e = match TraceReader::from_csv_reader(
            Path::new("bin.csv"),
            std::io::Cursor::new(vec![0xff, 0xfe, b'\n']),
        ) {
            Err(e) => e.to_string(),
            Ok(_) => String::new(),
        };
        assert_eq!(e, "bin.csv, line 1: not UTF-8 text (is this a CSV trace?)");
    }
}
