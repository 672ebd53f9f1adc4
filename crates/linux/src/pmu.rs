//! Kernel PMUs described in sysfs (`/sys/bus/event_source/devices/PMU/{type,format,events}`) and the
//! hardware memory-sampling events `numaff profile` opens from them: Intel PEBS loads and stores,
//! AMD IBS op.
//!
//! The encoding follows the kernel's ABI documents (sysfs-bus-event_source-devices-format and
//! -events): a format file maps a field name to bits of `config`, `config1` or `config2`
//! (`config:0-7`, `config1:0-15`, `config:19`, or several ranges `config:0-7,32-35`, a value's
//! bits filling them from the lowest); an event file lists terms `name=0x1d`, `name` (= 1) or
//! `name=?` (a value the user must give). perf-event2's `DynamicBuilder` reads the same files but
//! needs a value for every field of the format, and Intel's format has fields that overlap
//! (`ldlat` config1:0-15 inside `offcore_rsp` config1:0-63), so filling the others with 0 would
//! clear `ldlat` depending on the order it applies them; it also rejects multi-range formats. So
//! the encoding is here, and the result goes to perf-event2 as an [`Event`].
//!
//! Nothing of this could run on the development machines (no PMU in the VM): it is tested against
//! fixture sysfs trees written from the kernel's format and event attributes
//! (tests/fixtures/sysfs), and is **untested on hardware**.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use perf_event::events::Event;
use perf_event::SampleSkid;
use perf_event_open_sys::bindings::perf_event_attr;

/// Where the kernel lists its PMUs.
pub const SYSFS_DEVICES: &str = "/sys/bus/event_source/devices";

/// The load-latency threshold of PEBS loads by default, in core cycles (as `perf mem record`).
pub const DEFAULT_LDLAT: u64 = 30;

/// A PMU sysfs tree that could not be read or used: the file, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmuError {
    /// The file or directory concerned.
    pub path: PathBuf,
    /// What is wrong, in words.
    pub problem: String,
}

impl fmt::Display for PmuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.problem)
    }
}

impl std::error::Error for PmuError {}

fn err(path: &Path, problem: impl Into<String>) -> PmuError {
    PmuError {
        path: path.to_path_buf(),
        problem: problem.into(),
    }
}

/// A run of bits of one of the attr's config words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bits {
    /// 0 for `config`, 1 for `config1`, 2 for `config2`.
    word: usize,
    lo: u32,
    hi: u32,
}

/// A PMU's perf type number and its format: field name → the bits it occupies, in value order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmuFormat {
    dir: PathBuf,
    ty: u32,
    fields: BTreeMap<String, Vec<Bits>>,
}

/// An event of a sysfs PMU, ready for perf-event2's builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmuEvent {
    /// `perf_event_attr.type`.
    pub ty: u32,
    /// `config`, `config1`, `config2`.
    pub config: [u64; 3],
}

impl Event for PmuEvent {
    fn update_attrs(self, attr: &mut perf_event_attr) {
        attr.type_ = self.ty;
        attr.config = self.config[0];
        attr.config1 = self.config[1];
        attr.config2 = self.config[2];
    }
}

/// Parses one format file's text, e.g. `config1:0-15` or `config:0-7,32-35`.
fn parse_format(path: &Path, text: &str) -> Result<Vec<Bits>, PmuError> {
    let text = text.trim();
    let (word, ranges) = text
        .split_once(':')
        .ok_or_else(|| err(path, format!("{text:?} is not `configN:BITS`")))?;
    let word = match word {
        "config" => 0,
        "config1" => 1,
        "config2" => 2,
        other => {
            return Err(err(
                path,
                format!("{other:?} is not config, config1 or config2 (a newer kernel's field?)"),
            ))
        }
    };
    let mut out = Vec::new();
    for r in ranges.split(',') {
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .ok()
                .filter(|&b| b < 64)
                .ok_or_else(|| err(path, format!("{s:?} is not a bit number 0-63 in {text:?}")))
        };
        let (lo, hi) = match r.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let b = num(r)?;
                (b, b)
            }
        };
        if lo > hi {
            return Err(err(path, format!("range {r:?} runs backwards in {text:?}")));
        }
        out.push(Bits { word, lo, hi });
    }
    Ok(out)
}

/// An event's terms: name and value, `None` for a value the user must give (`name=?`).
pub type Terms = Vec<(String, Option<u64>)>;

/// Parses an event file's terms, e.g. `event=0xcd,umask=0x1,ldlat=3`: `None` for `name=?`.
fn parse_terms(path: &Path, text: &str) -> Result<Terms, PmuError> {
    let mut out = Vec::new();
    for term in text.trim().split(',').filter(|t| !t.trim().is_empty()) {
        let term = term.trim();
        let (name, value) = match term.split_once('=') {
            None => (term, Some(1)),
            Some((n, "?")) => (n, None),
            Some((n, v)) => {
                let v = v.trim();
                let parsed = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => v.parse::<u64>(),
                };
                let value = parsed
                    .map_err(|_| err(path, format!("{v:?} is not a number in term {term:?}")))?;
                (n, Some(value))
            }
        };
        out.push((name.trim().to_string(), value));
    }
    Ok(out)
}

impl PmuFormat {
    /// Reads `DIR/type` and `DIR/format/*`.
    pub fn read(dir: &Path) -> Result<Self, PmuError> {
        let type_path = dir.join("type");
        let ty = std::fs::read_to_string(&type_path)
            .map_err(|e| err(&type_path, format!("cannot read the PMU's type: {e}")))?
            .trim()
            .parse::<u32>()
            .map_err(|_| err(&type_path, "the PMU's type is not a number"))?;
        let format_dir = dir.join("format");
        let entries = std::fs::read_dir(&format_dir)
            .map_err(|e| err(&format_dir, format!("cannot list the PMU's format: {e}")))?;
        let mut fields = BTreeMap::new();
        for e in entries {
            let e = e.map_err(|e| err(&format_dir, format!("cannot list: {e}")))?;
            let path = e.path();
            let text = std::fs::read_to_string(&path)
                .map_err(|x| err(&path, format!("cannot read: {x}")))?;
            let name = e.file_name().to_string_lossy().into_owned();
            fields.insert(name, parse_format(&path, &text)?);
        }
        Ok(PmuFormat {
            dir: dir.to_path_buf(),
            ty,
            fields,
        })
    }

    /// Whether the format has a field of this name.
    pub fn has_field(&self, name: &str) -> bool {
        self.fields.contains_key(name)
    }

    /// The terms of `DIR/events/NAME`, or None if the PMU has no such event.
    pub fn event_terms(&self, name: &str) -> Result<Option<Terms>, PmuError> {
        let path = self.dir.join("events").join(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => parse_terms(&path, &text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(err(&path, format!("cannot read: {e}"))),
        }
    }

    /// Encodes terms into an event; `overrides` replace or add terms (e.g. `ldlat`). A term whose
    /// value is still unknown (`name=?` in the event file and not overridden), a field the format
    /// lacks or a value wider than its field is an error naming the event.
    pub fn encode(
        &self,
        event: &str,
        terms: &[(String, Option<u64>)],
        overrides: &[(&str, u64)],
    ) -> Result<PmuEvent, PmuError> {
        let path = self.dir.join("events").join(event);
        let mut values: Terms = terms.to_vec();
        for &(name, v) in overrides {
            match values.iter_mut().find(|(n, _)| n == name) {
                Some(t) => t.1 = Some(v),
                None => values.push((name.to_string(), Some(v))),
            }
        }
        let mut config = [0u64; 3];
        for (name, value) in &values {
            let bits = self.fields.get(name).ok_or_else(|| {
                err(
                    &path,
                    format!(
                        "term {name:?} is not a field of {}/format",
                        self.dir.display()
                    ),
                )
            })?;
            let mut v = value
                .ok_or_else(|| err(&path, format!("term {name:?} needs a value (`{name}=?`)")))?;
            let width: u32 = bits.iter().map(|b| b.hi - b.lo + 1).sum();
            if width < 64 && v >> width != 0 {
                return Err(err(
                    &path,
                    format!("{name}={v} does not fit the field's {width} bits"),
                ));
            }
            for b in bits {
                let n = b.hi - b.lo + 1;
                let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
                config[b.word] = (config[b.word] & !(mask << b.lo)) | ((v & mask) << b.lo);
                v = if n == 64 { 0 } else { v >> n };
            }
        }
        Ok(PmuEvent {
            ty: self.ty,
            config,
        })
    }
}

/// A hardware event to sample: what it is, how to open it, and what its samples mean.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwEvent {
    /// e.g. `cpu/mem-loads,ldlat=30/`, as perf would name it.
    pub label: String,
    /// The encoded event.
    pub event: PmuEvent,
    /// `precise_ip` to ask for: PEBS events need it, IBS does not.
    pub precise: SampleSkid,
}

/// The hardware events of a sampler found in a sysfs tree, and what could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwEvents {
    /// The events to open on every cpu.
    pub events: Vec<HwEvent>,
    /// Events found but left out, and why.
    pub notes: Vec<String>,
}

/// Intel PEBS memory sampling from `devices` (normally [`SYSFS_DEVICES`]): `mem-loads` with the
/// load-latency threshold `ldlat` (core cycles) and `mem-stores`, on the `cpu` PMU or, on hybrid
/// parts, `cpu_core` (the performance cores; the efficiency cores' `cpu_atom` is left out).
/// Where the PMU also lists `mem-loads-aux` (Sapphire Rapids, Alder Lake and later), loads must be
/// opened in a group led by that auxiliary event; numaff does not do that yet and samples stores
/// only there, saying so in the notes.
pub fn pebs_events(devices: &Path, ldlat: u64) -> Result<HwEvents, PmuError> {
    let pmu_dir = ["cpu", "cpu_core"]
        .iter()
        .map(|p| devices.join(p))
        .find(|d| d.join("events/mem-loads").exists() || d.join("events/mem-stores").exists())
        .ok_or_else(|| {
            err(
                &devices.join("cpu/events"),
                "no mem-loads or mem-stores event: no Intel PEBS memory sampling here (not Intel, \
                 or a VM without PMU passthrough)",
            )
        })?;
    let pmu = PmuFormat::read(&pmu_dir)?;
    let name = pmu_dir
        .file_name()
        .map_or("cpu".into(), |n| n.to_string_lossy().into_owned());
    let mut out = HwEvents {
        events: Vec::new(),
        notes: Vec::new(),
    };
    if let Some(terms) = pmu.event_terms("mem-loads")? {
        if pmu.event_terms("mem-loads-aux")?.is_some() {
            out.notes.push(format!(
                "{name}/mem-loads/ needs a group led by {name}/mem-loads-aux/ on this CPU, which \
                 numaff does not open yet: loads are not sampled (perf mem record and \
                 `numaff profile --import` sample them)"
            ));
        } else {
            let overrides: Vec<(&str, u64)> = if pmu.has_field("ldlat") {
                vec![("ldlat", ldlat)]
            } else {
                Vec::new()
            };
            out.events.push(HwEvent {
                label: format!("{name}/mem-loads,ldlat={ldlat}/"),
                event: pmu.encode("mem-loads", &terms, &overrides)?,
                precise: SampleSkid::RequestZero,
            });
        }
    }
    if let Some(terms) = pmu.event_terms("mem-stores")? {
        out.events.push(HwEvent {
            label: format!("{name}/mem-stores/"),
            event: pmu.encode("mem-stores", &terms, &[])?,
            precise: SampleSkid::RequestZero,
        });
    }
    if out.events.is_empty() {
        return Err(err(
            &pmu_dir.join("events"),
            format!(
                "no PEBS memory event numaff can open: {}",
                out.notes.join("; ")
            ),
        ));
    }
    Ok(out)
}

/// AMD IBS op sampling from `devices`: the `ibs_op` PMU with every field 0 (ops sampled by
/// cycle count, as `perf mem record` on AMD); the kernel fills ADDR, WEIGHT and DATA_SRC from the
/// IBS registers (DATA_SRC since Linux 6.1).
pub fn ibs_events(devices: &Path) -> Result<HwEvents, PmuError> {
    let dir = devices.join("ibs_op");
    if !dir.exists() {
        return Err(err(
            &dir,
            "no ibs_op PMU: no AMD IBS here (not AMD, or a VM without IBS)",
        ));
    }
    let pmu = PmuFormat::read(&dir)?;
    Ok(HwEvents {
        events: vec![HwEvent {
            label: "ibs_op//".into(),
            event: pmu.encode("ibs_op", &[], &[])?,
            precise: SampleSkid::Arbitrary,
        }],
        notes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/sysfs")
            .join(name)
    }

    #[test]
    fn pebs_events_on_a_skylake_pmu() {
        let ev = pebs_events(&fixture("skylake"), 30).expect("skylake");
        assert!(ev.notes.is_empty(), "{:?}", ev.notes);
        let labels: Vec<&str> = ev.events.iter().map(|e| e.label.as_str()).collect();
        assert_eq!(labels, ["cpu/mem-loads,ldlat=30/", "cpu/mem-stores/"]);
        // event=0xcd,umask=0x1 and ldlat 30 in config1 (perf's own encoding of
        // cpu/mem-loads,ldlat=30/), although offcore_rsp and frontend overlap ldlat's bits.
        assert_eq!(
            ev.events[0].event,
            PmuEvent {
                ty: 4,
                config: [0x1cd, 30, 0]
            }
        );
        assert_eq!(
            ev.events[1].event,
            PmuEvent {
                ty: 4,
                config: [0x82d0, 0, 0]
            }
        );
        assert!(ev
            .events
            .iter()
            .all(|e| e.precise == SampleSkid::RequestZero));
    }

    #[test]
    fn loads_needing_the_aux_leader_are_left_out_with_a_note() {
        let ev = pebs_events(&fixture("sapphire-rapids"), 50).expect("spr");
        assert_eq!(ev.events.len(), 1);
        assert_eq!(ev.events[0].label, "cpu/mem-stores/");
        assert_eq!(ev.events[0].event.config, [0x2cd, 0, 0]);
        assert!(ev.notes[0].contains("mem-loads-aux"), "{:?}", ev.notes);
    }

    #[test]
    fn hybrid_parts_use_the_performance_cores_pmu() {
        let ev = pebs_events(&fixture("alder-lake"), 30).expect("adl");
        assert_eq!(ev.events.len(), 1);
        assert_eq!(ev.events[0].label, "cpu_core/mem-stores/");
        assert_eq!(ev.events[0].event.ty, 4);
    }

    #[test]
    fn ibs_op_on_a_zen4_pmu() {
        let ev = ibs_events(&fixture("zen4")).expect("zen4");
        assert_eq!(ev.events[0].label, "ibs_op//");
        assert_eq!(
            ev.events[0].event,
            PmuEvent {
                ty: 11,
                config: [0, 0, 0]
            }
        );
        assert_eq!(ev.events[0].precise, SampleSkid::Arbitrary);
    }

    #[test]
    fn no_pmu_is_a_clear_error() {
        let e = pebs_events(&fixture("kvm"), 30).expect_err("kvm has no PEBS");
        assert!(e.to_string().contains("no Intel PEBS"), "{e}");
        let e = ibs_events(&fixture("kvm")).expect_err("kvm has no IBS");
        assert!(e.to_string().contains("ibs_op"), "{e}");
    }

    #[test]
    fn multi_range_fields_fill_from_the_lowest_bits() {
        // AMD's core PMU: event is config:0-7,32-35.
        let bits = parse_format(Path::new("event"), "config:0-7,32-35\n").expect("format");
        let pmu = PmuFormat {
            dir: PathBuf::from("/x"),
            ty: 4,
            fields: [("event".to_string(), bits)].into_iter().collect(),
        };
        let e = pmu
            .encode("e", &[("event".into(), Some(0x1cd))], &[])
            .expect("fits");
        assert_eq!(e.config[0], 0xcd | (1 << 32));
        let e = pmu
            .encode("e", &[("event".into(), Some(0x1000))], &[])
            .expect_err("13 bits into 12");
        assert!(e.problem.contains("does not fit"), "{e}");
    }

    #[test]
    fn bad_format_and_event_files_name_the_problem() {
        let p = Path::new("f");
        assert!(parse_format(p, "config9:0-3")
            .expect_err("dest")
            .problem
            .contains("config9"));
        assert!(parse_format(p, "config:7-0")
            .expect_err("backwards")
            .problem
            .contains("backwards"));
        assert!(parse_format(p, "config:0-64")
            .expect_err("bit 64")
            .problem
            .contains("bit number"));
        assert!(parse_format(p, "config")
            .expect_err("no colon")
            .problem
            .contains("configN:BITS"));
        assert!(parse_terms(p, "event=0xzz")
            .expect_err("hex")
            .problem
            .contains("not a number"));
        assert_eq!(
            parse_terms(p, "event=0xcd,umask=0x1,ldlat=3,inv,cmask=?\n").expect("terms"),
            vec![
                ("event".to_string(), Some(0xcd)),
                ("umask".to_string(), Some(1)),
                ("ldlat".to_string(), Some(3)),
                ("inv".to_string(), Some(1)),
                ("cmask".to_string(), None),
            ]
        );
        let pmu = PmuFormat::read(&fixture("skylake/cpu")).expect("skylake");
        let e = pmu
            .encode("x", &[("nosuch".into(), Some(1))], &[])
            .expect_err("unknown field");
        assert!(e.problem.contains("nosuch"), "{e}");
        let e = pmu
            .encode("x", &[("cmask".into(), None)], &[])
            .expect_err("parameter");
        assert!(e.problem.contains("needs a value"), "{e}");
        let e = pmu
            .encode("x", &[], &[("ldlat", 70_000)])
            .expect_err("ldlat is 16 bits");
        assert!(e.problem.contains("16 bits"), "{e}");
        let e = PmuFormat::read(&fixture("kvm/cpu")).expect_err("no type file");
        assert!(e.to_string().contains("type"), "{e}");
    }
}
