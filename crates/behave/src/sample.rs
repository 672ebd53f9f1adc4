//! One observed memory access (DESIGN.md "Sample") and the metadata that travels with a trace.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What kind of access a sample saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A page fault (first touch or induced): an access whose kind (read or write) is unknown.
    Fault,
    /// A load (hardware sampling: PEBS mem-loads, IBS op).
    Load,
    /// A store (PEBS mem-stores, IBS op).
    Store,
}

impl Kind {
    /// The name in trace files: `fault`, `load`, `store`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Fault => "fault",
            Kind::Load => "load",
            Kind::Store => "store",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fault" => Ok(Kind::Fault),
            "load" => Ok(Kind::Load),
            "store" => Ok(Kind::Store),
            _ => Err(format!(
                "unknown kind {:?} (expected fault, load or store)",
                shorten(s)
            )),
        }
    }
}

/// Where a sampled access was served from, as far as the sampler can tell (perf's
/// `perf_mem_data_src` levels, folded to what placement cares about).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DataSource {
    /// L1 data cache.
    L1,
    /// Line fill buffer (a miss already in flight).
    Lfb,
    /// L2 cache.
    L2,
    /// Last-level cache of the local package.
    L3,
    /// A cache of another package (remote cache / HITM).
    RemoteCache,
    /// DRAM of the local node.
    LocalDram,
    /// DRAM of another node.
    RemoteDram,
    /// Persistent memory.
    Pmem,
    /// I/O or uncached memory.
    Uncached,
    /// The sampler reported a source it could not classify.
    Other,
}

impl DataSource {
    /// Every source, in order.
    pub const ALL: [DataSource; 10] = [
        DataSource::L1,
        DataSource::Lfb,
        DataSource::L2,
        DataSource::L3,
        DataSource::RemoteCache,
        DataSource::LocalDram,
        DataSource::RemoteDram,
        DataSource::Pmem,
        DataSource::Uncached,
        DataSource::Other,
    ];

    /// The name in trace files.
    pub fn as_str(self) -> &'static str {
        match self {
            DataSource::L1 => "l1",
            DataSource::Lfb => "lfb",
            DataSource::L2 => "l2",
            DataSource::L3 => "l3",
            DataSource::RemoteCache => "remote_cache",
            DataSource::LocalDram => "local_dram",
            DataSource::RemoteDram => "remote_dram",
            DataSource::Pmem => "pmem",
            DataSource::Uncached => "uncached",
            DataSource::Other => "other",
        }
    }

    /// Whether the access went to DRAM (local or remote): the DramV of DeLocProf's DramR (002 eq. 2.5).
    pub fn is_dram(self) -> bool {
        matches!(self, DataSource::LocalDram | DataSource::RemoteDram)
    }
}

impl fmt::Display for DataSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DataSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DataSource::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown data_source {:?} (expected one of {})",
                    shorten(s),
                    DataSource::ALL.map(|d| d.as_str()).join(", ")
                )
            })
    }
}

/// At most 40 characters of a value, for error messages about garbage input.
pub(crate) fn shorten(s: &str) -> String {
    if s.chars().count() <= 40 {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(40).collect();
        t.push('…');
        t
    }
}

/// One observed memory access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// When, in ns (CLOCK_MONOTONIC for perf samples; any common origin for a trace).
    pub time_ns: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id (the kernel's tid).
    pub tid: u32,
    /// The cpu (PU) the thread ran on.
    pub cpu: u32,
    /// The NUMA node of that cpu.
    pub node: u32,
    /// The virtual address accessed.
    pub addr: u64,
    /// Fault, load or store.
    pub kind: Kind,
    /// Access latency in ns, when the sampler measures it (PEBS weight, IBS latency).
    pub latency_ns: Option<u64>,
    /// Where the access was served from, when the sampler knows it.
    pub data_source: Option<DataSource>,
}

/// What travels with a trace besides its samples: in Parquet the file's key-value metadata, under
/// keys `numaff.<field>` (rates and thread_names as JSON objects).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceMeta {
    /// The machine the trace was taken on: a machine file (TOML text) or a catalog name.
    pub machine: Option<String>,
    /// The profiled command line.
    pub command: Option<String>,
    /// The sampler that took the samples (e.g. `page-faults`, `pebs`).
    pub sampler: Option<String>,
    /// Rates and counts the sampler reports, by name (e.g. `samples_per_s`, `lost`, `period`).
    pub rates: BTreeMap<String, f64>,
    /// Thread names by tid (from /proc/PID/task/TID/comm).
    pub thread_names: BTreeMap<u32, String>,
    /// The page size of the traced process in bytes (default 4096 when absent).
    pub page_size: Option<u64>,
}

impl TraceMeta {
    /// The Parquet key-value pairs of this metadata (absent fields are left out).
    pub fn to_key_values(&self) -> Vec<(String, String)> {
        let mut kv = vec![("numaff.format".to_string(), "1".to_string())];
        let mut put = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                kv.push((format!("numaff.{k}"), v));
            }
        };
        put("machine", self.machine.clone());
        put("command", self.command.clone());
        put("sampler", self.sampler.clone());
        put("page_size", self.page_size.map(|p| p.to_string()));
        if !self.rates.is_empty() {
            put("rates", serde_json::to_string(&self.rates).ok());
        }
        if !self.thread_names.is_empty() {
            put(
                "thread_names",
                serde_json::to_string(&self.thread_names).ok(),
            );
        }
        kv
    }

    /// Reads the metadata back from key-value pairs; unknown keys are ignored, malformed values are an
    /// error naming the key.
    pub fn from_key_values<'a>(
        kv: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Self, String> {
        let mut m = TraceMeta::default();
        for (k, v) in kv {
            let Some(v) = v else { continue };
            match k {
                "numaff.machine" => m.machine = Some(v.to_string()),
                "numaff.command" => m.command = Some(v.to_string()),
                "numaff.sampler" => m.sampler = Some(v.to_string()),
                "numaff.page_size" => {
                    let p: u64 = v
                        .parse()
                        .map_err(|_| format!("numaff.page_size is not a number: {}", shorten(v)))?;
                    if !p.is_power_of_two() {
                        return Err(format!("numaff.page_size {p} is not a power of two"));
                    }
                    m.page_size = Some(p);
                }
                "numaff.rates" => {
                    m.rates = serde_json::from_str(v)
                        .map_err(|e| format!("numaff.rates is not a JSON object of numbers: {e}"))?
                }
                "numaff.thread_names" => {
                    m.thread_names = serde_json::from_str(v).map_err(|e| {
                        format!("numaff.thread_names is not a JSON object of tid: name: {e}")
                    })?
                }
                _ => {}
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in [Kind::Fault, Kind::Load, Kind::Store] {
            assert_eq!(k.as_str().parse::<Kind>(), Ok(k));
        }
        for d in DataSource::ALL {
            assert_eq!(d.as_str().parse::<DataSource>(), Ok(d));
        }
        assert!("LOAD".parse::<Kind>().is_err());
        assert!(DataSource::RemoteDram.is_dram() && !DataSource::L3.is_dram());
    }

    #[test]
    fn meta_round_trips_through_key_values() {
        let mut m = TraceMeta {
            machine: Some("laso-hpl".into()),
            command: Some("./a.out 8".into()),
            sampler: Some("page-faults".into()),
            page_size: Some(4096),
            ..Default::default()
        };
        m.rates.insert("samples_per_s".into(), 1e5);
        m.thread_names.insert(812, "worker-1".into());
        let kv = m.to_key_values();
        let back =
            TraceMeta::from_key_values(kv.iter().map(|(k, v)| (k.as_str(), Some(v.as_str()))));
        assert_eq!(back, Ok(m));
        assert!(TraceMeta::from_key_values([("numaff.rates", Some("[1"))]).is_err());
        assert!(TraceMeta::from_key_values([("numaff.page_size", Some("1000"))]).is_err());
    }
}
