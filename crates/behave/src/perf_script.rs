//! Import of `perf script` text (from `perf mem record`, or `perf record -e page-faults -d`) as
//! samples, so that users with PEBS or IBS can bring their own data to `numaff analyze`.
//!
//! One sample per line, in the layout `perf script` prints (fields it was not asked for are absent):
//!
//! ```text
//! COMM  PID/TID [CPU] SECONDS.FRACTION: [PERIOD] EVENT: ADDR [DATA_SRC |decoded|] [WEIGHT] [...]
//!   pf 19098/19102 [001] 10868.447952: page-faults:u:     7f26dc0b4000
//!   a.out 812/813 [002] 91.123456789: cpu/mem-loads,ldlat=30/P: 7ffd0a10 68100142 |OP LOAD|LVL L1 hit|SNP None 45
//! ```
//!
//! - `TID` is required; `PID/TID` (`-F pid,tid`) gives both, a single number is the tid and the pid
//!   is recorded as 0. `COMM` (any text, spaces allowed) becomes the thread's name.
//! - `[CPU]` is required: the node of a sample is the node of its cpu.
//! - the time, `SECONDS.FRACTION:` (6 digits by default, 9 with `--ns`), is required.
//! - `PERIOD` (a number before the event) is skipped; `EVENT:` is required (its name ends at the
//!   last `:`); its name gives the kind when the data source does not (`mem-loads`, `load` → load,
//!   `mem-stores`, `store` → store, `fault` → fault).
//! - `ADDR` (hexadecimal, as perf prints it, `0x` optional) is required, right after the event: run
//!   `perf script -F comm,pid,tid,cpu,time,event,addr,data_src,weight`.
//! - `DATA_SRC` (hexadecimal `perf_mem_data_src`, followed by perf's decoded `|OP ...|LVL ...` text)
//!   gives load/store and where the access was served from ([`decode_data_src`]).
//! - `WEIGHT` (decimal, the first number after the decoded data source, or right after `ADDR` when
//!   there is no data source) becomes `latency_ns` unchanged: PEBS reports it in core cycles.
//! - After a data source, anything further (`perf script`'s default ip, symbol, dso, phys_addr) is
//!   ignored; without a data source, a field after `ADDR` and the weight is an error, because in
//!   `perf script`'s default output for software events the hexadecimal number after the event is
//!   the instruction address, not the data address.
//! - Blank lines and lines starting with `#` (`perf script --header`) are skipped.

use std::collections::BTreeMap;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use crate::sample::shorten;
use crate::tracefile::{TraceError, BATCH_ROWS};
use crate::{DataSource, Kind, Sample};

/// The longest line accepted (perf's symbol names can be long; a binary file has no newlines).
pub const MAX_LINE: usize = 64 * 1024;

/// The command whose output this module reads, for error messages.
pub const RECOMMENDED: &str = "perf script -F comm,pid,tid,cpu,time,event,addr,data_src,weight";

/// One parsed line: the sample (without its node) and the command name, if the line had one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfLine {
    /// The sample; `node` is 0 (the reader fills it in from the cpu).
    pub sample: Sample,
    /// The command name (`comm`), empty when absent.
    pub comm: String,
}

/// The kind (load/store) and data source of a `perf_mem_data_src` value, as perf defines it
/// (include/uapi/linux/perf_event.h): mem_op bits 0-4, mem_lvl bits 5-18, mem_snoop bits 19-23,
/// mem_lvl_num bits 33-36, mem_remote bit 37. `None` where the value says "not available".
pub fn decode_data_src(v: u64) -> (Option<Kind>, Option<DataSource>) {
    let op = v & 0x1f;
    let lvl = (v >> 5) & 0x3fff;
    let snoop = (v >> 19) & 0x1f;
    let lvl_num = (v >> 33) & 0xf;
    let remote = (v >> 37) & 1 == 1;
    let kind = if op & 0x2 != 0 {
        Some(Kind::Load)
    } else if op & 0x4 != 0 {
        Some(Kind::Store)
    } else {
        None
    };
    // PERF_MEM_LVL_*: NA 1, HIT 2, MISS 4, L1 8, LFB 0x10, L2 0x20, L3 0x40, LOC_RAM 0x80,
    // REM_RAM1 0x100, REM_RAM2 0x200, REM_CCE1 0x400, REM_CCE2 0x800, IO 0x1000, UNC 0x2000.
    let hitm = snoop & 0x10 != 0;
    let src = if lvl & 0xc00 != 0 || (hitm && lvl & 0xc0 == 0) && lvl & !0x7 != 0 {
        Some(DataSource::RemoteCache)
    } else if lvl & 0x300 != 0 {
        Some(DataSource::RemoteDram)
    } else if lvl & 0x80 != 0 {
        Some(DataSource::LocalDram)
    } else if lvl & 0x40 != 0 {
        Some(DataSource::L3)
    } else if lvl & 0x20 != 0 {
        Some(DataSource::L2)
    } else if lvl & 0x10 != 0 {
        Some(DataSource::Lfb)
    } else if lvl & 0x8 != 0 {
        Some(DataSource::L1)
    } else if lvl & 0x3000 != 0 {
        Some(DataSource::Uncached)
    } else {
        // Newer kernels leave mem_lvl as NA and say the level in mem_lvl_num (PERF_MEM_LVLNUM_*:
        // L1 1, L2 2, L3 3, L4 4, CXL 9, IO 0xa, ANY_CACHE 0xb, LFB 0xc, RAM 0xd, PMEM 0xe, NA 0xf).
        match lvl_num {
            0x1 => Some(DataSource::L1),
            0x2 => Some(DataSource::L2),
            0x3 | 0x4 if remote || hitm => Some(DataSource::RemoteCache),
            0x3 | 0x4 => Some(DataSource::L3),
            0xb if remote => Some(DataSource::RemoteCache),
            0xc => Some(DataSource::Lfb),
            0xd if remote => Some(DataSource::RemoteDram),
            0xd => Some(DataSource::LocalDram),
            0xe => Some(DataSource::Pmem),
            0xa => Some(DataSource::Uncached),
            0x0 | 0xf => None,
            _ => Some(DataSource::Other),
        }
    };
    (kind, src)
}

fn is_hex(t: &str) -> bool {
    let t = t.strip_prefix("0x").unwrap_or(t);
    !t.is_empty() && t.len() <= 16 && t.bytes().all(|b| b.is_ascii_hexdigit())
}

fn hex(name: &str, t: &str) -> Result<u64, String> {
    let h = t.strip_prefix("0x").unwrap_or(t);
    u64::from_str_radix(h, 16)
        .map_err(|_| format!("{name} {:?} is not a hexadecimal number", shorten(t)))
}

fn dec<T: std::str::FromStr>(name: &str, t: &str) -> Result<T, String> {
    t.parse::<T>()
        .map_err(|_| format!("{name} {:?} is not a number in range", shorten(t)))
}

/// `SECONDS.FRACTION:` to ns (a fraction of up to 9 digits).
fn parse_time(t: &str) -> Option<u64> {
    let t = t.strip_suffix(':')?;
    let (s, f) = t.split_once('.')?;
    if s.is_empty()
        || f.is_empty()
        || f.len() > 9
        || !s.bytes().all(|b| b.is_ascii_digit())
        || !f.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let secs: u64 = s.parse().ok()?;
    let frac: u64 = f.parse().ok()?;
    let frac_ns = frac.checked_mul(10u64.pow(9 - f.len() as u32))?;
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// The kind an event's name implies, if any.
fn kind_of_event(event: &str) -> Option<Kind> {
    let e = event.to_ascii_lowercase();
    if e.contains("load") {
        Some(Kind::Load)
    } else if e.contains("store") {
        Some(Kind::Store)
    } else if e.contains("fault") {
        Some(Kind::Fault)
    } else {
        None
    }
}

/// Parses one line of `perf script` output (see the module documentation for the layout).
pub fn parse_line(line: &str) -> Result<PerfLine, String> {
    let tokens: Vec<&str> = line.split_ascii_whitespace().collect();
    let Some(ti) = tokens.iter().position(|t| parse_time(t).is_some()) else {
        return Err(format!(
            "no time field (SECONDS.FRACTION:) in this line; write the file with `{RECOMMENDED}`"
        ));
    };
    let time_ns = parse_time(tokens[ti]).unwrap_or(0);
    // Before the time: COMM words, PID/TID or TID, [CPU].
    let mut before = &tokens[..ti];
    let cpu = match before.last() {
        Some(t) if t.starts_with('[') && t.ends_with(']') && t.len() > 2 => {
            before = &before[..before.len() - 1];
            dec::<u32>("cpu", &t[1..t.len() - 1])?
        }
        _ => {
            return Err(format!(
                "no [CPU] field before the time: numaff needs the cpu of each sample for its node \
                 (record with --sample-cpu, print with `{RECOMMENDED}`)"
            ))
        }
    };
    let Some((&ids, comm_words)) = before.split_last() else {
        return Err(format!(
            "no thread id before the cpu; write the file with `{RECOMMENDED}`"
        ));
    };
    let (pid, tid) = match ids.split_once('/') {
        Some((p, t)) => (dec::<u32>("pid", p)?, dec::<u32>("tid", t)?),
        None => (0, dec::<u32>("tid", ids)?),
    };
    let comm = comm_words.join(" ");
    // After the time: [PERIOD] EVENT: ADDR [DATA_SRC |...|] [WEIGHT] [...].
    let mut rest = &tokens[ti + 1..];
    if rest
        .first()
        .is_some_and(|t| t.bytes().all(|b| b.is_ascii_digit()))
    {
        rest = &rest[1..];
    }
    let event = match rest.first() {
        Some(t) if t.ends_with(':') && t.len() > 1 => t.trim_end_matches(':'),
        _ => {
            return Err(format!(
                "no event name (NAME:) after the time; write the file with `{RECOMMENDED}`"
            ))
        }
    };
    rest = &rest[1..];
    let addr = match rest.first() {
        Some(t) if is_hex(t) => hex("addr", t)?,
        Some(t) => {
            return Err(format!(
                "{:?} after the event is not a hexadecimal data address; write the file with `{RECOMMENDED}`",
                shorten(t)
            ))
        }
        None => {
            return Err(format!(
                "no data address after the event; write the file with `{RECOMMENDED}`"
            ))
        }
    };
    rest = &rest[1..];
    let mut data_src = None;
    if rest.len() >= 2 && is_hex(rest[0]) && rest[1].starts_with('|') {
        data_src = Some(hex("data_src", rest[0])?);
        rest = &rest[2..];
        // Perf's decoded text (`|OP LOAD|LVL L1 hit|SNP None|...|BLK  N/A`) has words but no
        // plain numbers: it ends at the first token made of digits only (the weight), if any.
        while rest
            .first()
            .is_some_and(|t| !t.bytes().all(|b| b.is_ascii_digit()))
        {
            rest = &rest[1..];
        }
    }
    let mut latency_ns = None;
    if let Some(t) = rest.first() {
        if t.bytes().all(|b| b.is_ascii_digit()) {
            latency_ns = Some(dec::<u64>("weight", t)?);
            rest = &rest[1..];
        }
    }
    if data_src.is_none() {
        if let Some(t) = rest.first() {
            return Err(format!(
                "unexpected field {:?} after the address: without a data source numaff cannot tell \
                 the data address from an instruction address; write the file with `{RECOMMENDED}`",
                shorten(t)
            ));
        }
    }
    let (op_kind, source) = data_src.map_or((None, None), decode_data_src);
    let Some(kind) = op_kind.or_else(|| kind_of_event(event)) else {
        return Err(format!(
            "event {:?} is neither a load, a store nor a page fault (its name has no load, store or \
             fault, and it has no data source saying which)",
            shorten(event)
        ));
    };
    Ok(PerfLine {
        sample: Sample {
            time_ns,
            pid,
            tid,
            cpu,
            node: 0,
            addr,
            kind,
            latency_ns,
            data_source: source,
        },
        comm,
    })
}

/// Whether a line is one `perf script` sample line (used to tell such a file from a CSV trace).
pub fn looks_like(line: &str) -> bool {
    parse_line(line).is_ok()
}

/// Streams the samples of a `perf script` text file in batches, like [`crate::TraceReader`]: an
/// iterator of `Result<Vec<Sample>, TraceError>` that ends after the first error. Errors name the
/// file and the 1-based line.
pub struct PerfScriptReader {
    path: PathBuf,
    lines: Box<dyn BufRead>,
    line_no: u64,
    node_of_cpu: Vec<u32>,
    thread_names: BTreeMap<u32, String>,
    done: bool,
}

impl PerfScriptReader {
    /// Reads `perf script` text from `reader` (`name` is used in errors). `node_of_cpu[cpu]` gives a
    /// cpu's NUMA node; a cpu beyond it is an error (the text was recorded on another machine).
    pub fn new(name: &Path, reader: impl Read + 'static, node_of_cpu: Vec<u32>) -> Self {
        PerfScriptReader {
            path: name.to_path_buf(),
            lines: Box::new(std::io::BufReader::new(reader)),
            line_no: 0,
            node_of_cpu,
            thread_names: BTreeMap::new(),
            done: false,
        }
    }

    /// Opens a file.
    pub fn open(path: &Path, node_of_cpu: Vec<u32>) -> Result<Self, TraceError> {
        let f = std::fs::File::open(path).map_err(|source| TraceError::Io {
            action: "open",
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Self::new(path, f, node_of_cpu))
    }

    /// The command names seen so far, by tid.
    pub fn thread_names(&self) -> &BTreeMap<u32, String> {
        &self.thread_names
    }

    fn row_err(&self, message: String) -> TraceError {
        TraceError::Row {
            path: self.path.clone(),
            unit: "line",
            at: self.line_no,
            message,
        }
    }

    /// The next line without its end; `None` at the end of the file.
    fn read_line(&mut self) -> Result<Option<String>, TraceError> {
        let mut buf = Vec::new();
        let n = self
            .lines
            .by_ref()
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|source| TraceError::Io {
                action: "read",
                path: self.path.clone(),
                source,
            })?;
        if n == 0 {
            return Ok(None);
        }
        self.line_no += 1;
        if buf.last() == Some(&b'\n') {
            buf.pop();
        } else if buf.len() > MAX_LINE {
            return Err(self.row_err(format!(
                "line longer than {MAX_LINE} bytes (is this `perf script` output?)"
            )));
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        String::from_utf8(buf)
            .map(Some)
            .map_err(|_| self.row_err("not UTF-8 text (is this `perf script` output?)".into()))
    }
}

impl Iterator for PerfScriptReader {
    type Item = Result<Vec<Sample>, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut out = Vec::new();
        while out.len() < BATCH_ROWS {
            let line = match self.read_line() {
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Ok(None) => {
                    self.done = true;
                    break;
                }
                Ok(Some(l)) => l,
            };
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let parsed = parse_line(t).and_then(|mut p| {
                match self.node_of_cpu.get(p.sample.cpu as usize) {
                    Some(&n) => p.sample.node = n,
                    None => {
                        return Err(format!(
                            "cpu {} is not a cpu of this machine ({} cpus): convert the file on \
                             the machine it was recorded on",
                            p.sample.cpu,
                            self.node_of_cpu.len()
                        ))
                    }
                }
                Ok(p)
            });
            match parsed {
                Ok(p) => {
                    if !p.comm.is_empty() {
                        self.thread_names
                            .entry(p.sample.tid)
                            .or_insert_with(|| p.comm.clone());
                    }
                    out.push(p.sample);
                }
                Err(message) => {
                    self.done = true;
                    return Some(Err(self.row_err(message)));
                }
            }
        }
        if out.is_empty() {
            None
        } else {
            Some(Ok(out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(line: &str) -> PerfLine {
        match parse_line(line) {
            Ok(p) => p,
            Err(e) => panic!("{line:?}: {e}"),
        }
    }

    fn err(line: &str) -> String {
        match parse_line(line) {
            Ok(p) => panic!("{line:?} parsed as {p:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn parses_page_fault_line_with_pid_tid_cpu_time_event_addr() {
        let p =
            ok("              pf 19098/19102 [001] 10868.447952: page-faults:u:     7f26dc0b4000");
        assert_eq!(p.comm, "pf");
        let s = p.sample;
        assert_eq!((s.pid, s.tid, s.cpu), (19098, 19102, 1));
        assert_eq!(s.time_ns, 10_868_447_952_000);
        assert_eq!(s.addr, 0x7f26_dc0b_4000);
        assert_eq!(s.kind, Kind::Fault);
        assert_eq!((s.latency_ns, s.data_source), (None, None));
    }

    #[test]
    fn parses_ns_time_period_and_tid_only() {
        // `--ns` prints 9 digits; without -F pid only the tid is printed (pid recorded as 0).
        let s =
            ok("pf 19102 [001] 10868.447952950:          1 page-faults:u:     7f26dc0b4000").sample;
        assert_eq!((s.pid, s.tid), (0, 19102));
        assert_eq!(s.time_ns, 10_868_447_952_950);
        assert_eq!(s.addr, 0x7f26_dc0b_4000);
    }

    #[test]
    fn comm_with_spaces_is_the_thread_name() {
        let p = ok("Web Content 77/78 [003] 1.000001: page-faults: 0x1000");
        assert_eq!(p.comm, "Web Content");
        assert_eq!((p.sample.tid, p.sample.cpu, p.sample.addr), (78, 3, 0x1000));
        assert_eq!(p.sample.time_ns, 1_000_001_000);
    }

    #[test]
    fn parses_mem_load_with_data_src_and_weight() {
        // data_src 0x68100142: op LOAD, lvl HIT|L1, snoop NONE, TLB L1/L2 hit.
        let p = ok("a.out 812/813 [002] 91.123456: cpu/mem-loads,ldlat=30/P:     7ffd0a10 \
                    68100142 |OP LOAD|LVL L1 hit|SNP None|TLB L1 or L2 hit|LCK No|BLK  N/A        45");
        let s = p.sample;
        assert_eq!(s.kind, Kind::Load);
        assert_eq!(s.addr, 0x7ffd_0a10);
        assert_eq!(s.data_source, Some(DataSource::L1));
        assert_eq!(s.latency_ns, Some(45));
    }

    #[test]
    fn default_perf_mem_output_ignores_ip_sym_dso_after_data_src() {
        // `perf script` with no -F on `perf mem record` data: period, then addr, data_src, weight,
        // then ip, symbol and dso (ignored). data_src: op STORE (4), lvl HIT|LOC_RAM (0x82 << 5).
        let src = 0x4 | (0x82 << 5);
        let line = format!(
            "  stream 10/11 [000] 5.000002:      20011 cpu/mem-stores/P:  7f0000001040 {src:x} \
             |OP STORE|LVL Local RAM hit|SNP None|TLB N/A|LCK N/A|BLK  N/A   0   401136 main+0x20 (/tmp/a.out)"
        );
        let s = ok(&line).sample;
        assert_eq!(s.kind, Kind::Store);
        assert_eq!(s.data_source, Some(DataSource::LocalDram));
        assert_eq!(s.latency_ns, Some(0));
        assert_eq!(s.addr, 0x7f00_0000_1040);
    }

    #[test]
    fn data_src_not_available_keeps_the_event_kind() {
        // What `perf script -F ...,data_src,weight` prints for a page-fault event here.
        let s = ok("pf 19727/19734 [000] 10877.809100: page-faults:u:     7faebde20000      \
                    1e05080021 |OP N/A|LVL N/A or N/A|SNP N/A|TLB N/A|LCK N/A|BLK  N/A               0")
        .sample;
        assert_eq!(s.kind, Kind::Fault);
        assert_eq!(s.data_source, None);
        assert_eq!(s.latency_ns, Some(0));
    }

    #[test]
    fn data_src_levels_map_to_data_sources() {
        let lvl = |l: u64| 0x2 | (l << 5);
        assert_eq!(
            decode_data_src(lvl(0x102)),
            (Some(Kind::Load), Some(DataSource::RemoteDram))
        );
        assert_eq!(decode_data_src(lvl(0x42)).1, Some(DataSource::L3));
        assert_eq!(decode_data_src(lvl(0x22)).1, Some(DataSource::L2));
        assert_eq!(decode_data_src(lvl(0x12)).1, Some(DataSource::Lfb));
        assert_eq!(
            decode_data_src(lvl(0x402) | (0x10 << 19)).1,
            Some(DataSource::RemoteCache)
        );
        assert_eq!(decode_data_src(lvl(0x2002)).1, Some(DataSource::Uncached));
        // lvl NA, level in mem_lvl_num: RAM (0xd) local and remote, PMEM.
        let num = |n: u64, remote: u64| 0x2 | (0x1 << 5) | (n << 33) | (remote << 37);
        assert_eq!(decode_data_src(num(0xd, 0)).1, Some(DataSource::LocalDram));
        assert_eq!(decode_data_src(num(0xd, 1)).1, Some(DataSource::RemoteDram));
        assert_eq!(decode_data_src(num(0xe, 0)).1, Some(DataSource::Pmem));
        assert_eq!(decode_data_src(num(0xf, 0)), (Some(Kind::Load), None));
        assert_eq!(decode_data_src(0x1e05080021), (None, None));
    }

    #[test]
    fn kind_follows_the_event_name() {
        let s = ok("x 1/2 [0] 1.5: mem-stores: 10").sample;
        assert_eq!(s.kind, Kind::Store);
        assert_eq!(s.time_ns, 1_500_000_000);
        assert_eq!(
            ok("x 1/2 [0] 1.5: cpu/mem-loads/P: 10").sample.kind,
            Kind::Load
        );
        assert_eq!(
            ok("x 1/2 [0] 1.5: major-faults: 10").sample.kind,
            Kind::Fault
        );
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        assert!(err("hello world").contains("no time field"));
        assert!(err("pf 1/2 10.5: page-faults: 1000").contains("no [CPU] field"));
        assert!(err("[001] 10.5: page-faults: 1000").contains("no thread id"));
        assert!(err("pf x/2 [1] 10.5: page-faults: 1000").contains("pid \"x\""));
        assert!(err("pf 1/2 [1] 10.5: 1000").contains("no event name"));
        assert!(err("pf 1/2 [1] 10.5: page-faults:").contains("no data address"));
        assert!(err("pf 1/2 [1] 10.5: page-faults: zz").contains("not a hexadecimal data address"));
        // perf script's default output for software events: the number is the ip, then a symbol.
        let e = err("pf 19102 [001] 10868.447952: 1 page-faults:u: 7f26dd2690ba __memset+0x7a (/usr/lib/libc.so.6)");
        assert!(e.contains("unexpected field \"__memset+0x7a\""), "{e}");
        assert!(
            err("x 1/2 [0] 1.5: cycles: 10").contains("neither a load, a store nor a page fault")
        );
        assert!(err("x 1/2 [99999999999] 1.5: page-faults: 10").contains("cpu \"99999999999\""));
        assert!(err("x 1/2 [0] 1.5: page-faults: 1ffffffffffffffff").contains("not a hexadecimal"));
    }

    #[test]
    fn reader_fills_nodes_names_and_reports_line_numbers() {
        let text = "# perf script --header\n\
                    \n\
                    a 1/1 [0] 1.000001: page-faults: 1000\n\
                    b 1/2 [1] 1.000002: page-faults: 2000\n\
                    b 1/2 [3] 1.000003: page-faults: 3000\n";
        let r = PerfScriptReader::new(
            Path::new("p.txt"),
            std::io::Cursor::new(text),
            vec![0, 0, 1, 1],
        );
        let mut r = r;
        let batch = r.next().expect("a batch").expect("parses");
        assert_eq!(batch.iter().map(|s| s.node).collect::<Vec<_>>(), [0, 0, 1]);
        assert_eq!(r.thread_names().get(&2).map(String::as_str), Some("b"));
        assert!(r.next().is_none());

        let bad = "a 1/1 [0] 1.000001: page-faults: 1000\na 1/1 [0] 1.000002: page-faults\n";
        let mut r = PerfScriptReader::new(Path::new("bad.txt"), std::io::Cursor::new(bad), vec![0]);
        let e = r
            .next()
            .expect("an item")
            .expect_err("line 2 is bad")
            .to_string();
        assert!(e.starts_with("bad.txt, line 2: no event name"), "{e}");
        assert!(r.next().is_none(), "ends after the first error");

        let far = "a 1/1 [5] 1.000001: page-faults: 1000\n";
        let mut r =
            PerfScriptReader::new(Path::new("far.txt"), std::io::Cursor::new(far), vec![0, 1]);
        let e = r
            .next()
            .expect("an item")
            .expect_err("cpu 5 is unknown")
            .to_string();
        assert!(
            e.contains("line 1: cpu 5 is not a cpu of this machine (2 cpus)"),
            "{e}"
        );

        let bin = vec![0xffu8, 0xfe, b'\n'];
        let mut r = PerfScriptReader::new(Path::new("bin.txt"), std::io::Cursor::new(bin), vec![0]);
        let e = r.next().expect("an item").expect_err("binary").to_string();
        assert!(e.contains("line 1: not UTF-8"), "{e}");
    }
}
