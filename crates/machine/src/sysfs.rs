//! Discovery of a [`Machine`] from Linux' sysfs and procfs, the fallback when hwloc is missing;
//! reads any root directory, so fake trees (tests, another machine's copy) work like the real one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::cpuset::CpuSet;
use crate::error::{MachineError, Result};
use crate::model::{Cache, CacheKind, Coherence, Core, Machine, Matrix, Node, Package};

/// The running machine from /sys and /proc, with the page size from the system.
pub fn discover() -> Result<Machine> {
    let mut m = discover_from(Path::new("/"))?;
    m.page_size = system_page_size();
    crate::file::check(&m, "sysfs")?;
    Ok(m)
}

/// The base page size of this system (sysconf), 4 KiB if it cannot be read.
pub(crate) fn system_page_size() -> u64 {
    // SAFETY: sysconf only reads a system constant; it has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|s| *s > 0).unwrap_or(4096)
}

/// The machine described by the sysfs and procfs under `root` ("/" for this machine). Reads:
///
/// - `sys/devices/system/cpu/online`, and for each online cpu `topology/physical_package_id`,
///   `topology/core_cpus_list` (or `thread_siblings_list` on kernels before 5.7),
///   `cache/index*/{level,type,size,coherency_line_size,ways_of_associativity,shared_cpu_list}` and
///   `cpufreq/cpuinfo_max_freq` when present;
/// - `sys/devices/system/node/node*/{cpulist,meminfo,distance}`; a kernel without NUMA support has no
///   such directory: the machine is then one node 0 with every online cpu and `proc/meminfo`'s
///   MemTotal;
/// - `proc/sys/kernel/hostname` for the name (else the root's directory name), `proc/cpuinfo`'s
///   model name for the description and its vendor_id for the coherence protocol
///   (`Coherence::of_vendor`), when present.
///
/// Offline cpus are left out, and so is the distance matrix of a single node (as hwloc does). The
/// page size is not in sysfs: it stays 4 KiB ([`discover`] asks the system). Cache ways: the kernel
/// leaves `ways_of_associativity` out when it does not know them, so a missing file (or 0) is
/// `None`. A missing line size is taken as 64 bytes and noted in `assumptions`, as are nodes with
/// neither cpus nor memory, which are left out.
pub fn discover_from(root: &Path) -> Result<Machine> {
    let fs = Tree { root };
    let origin = if root == Path::new("/") {
        "sysfs".to_string()
    } else {
        format!("sysfs at {}", root.display())
    };
    let mut m = Machine::new(machine_name(&fs, root));
    m.source = Some(origin.clone());
    m.description = model_name(&fs);
    m.coherence = cpuinfo_field(&fs, "vendor_id").and_then(|v| Coherence::of_vendor(&v));

    let cpu_dir = "sys/devices/system/cpu";
    let online = fs.cpulist(&format!("{cpu_dir}/online"))?;
    if online.is_empty() {
        return Err(fs.error(&format!("{cpu_dir}/online"), "lists no online cpu"));
    }

    // Packages and cores.
    let mut packages: BTreeMap<u32, Vec<CpuSet>> = BTreeMap::new();
    let mut package_minus_one = false;
    for cpu in &online {
        let topo = format!("{cpu_dir}/cpu{cpu}/topology");
        let package_file = format!("{topo}/physical_package_id");
        let raw = fs.read(&package_file)?;
        let package = match raw.trim().parse::<i64>() {
            Ok(-1) => {
                package_minus_one = true;
                0
            }
            Ok(id) => u32::try_from(id)
                .map_err(|_| fs.error(&package_file, format!("{id} is not a package id")))?,
            Err(_) => {
                return Err(fs.error(
                    &package_file,
                    format!("{:?} is not a package id", raw.trim()),
                ))
            }
        };
        let siblings_file = [
            format!("{topo}/core_cpus_list"),
            format!("{topo}/thread_siblings_list"),
        ]
        .into_iter()
        .find(|f| fs.path(f).exists())
        .ok_or_else(|| {
            fs.error(
                &format!("{topo}/core_cpus_list"),
                "missing, and so is thread_siblings_list: cannot tell which cpus share a core",
            )
        })?;
        let mut pus = fs.cpulist(&siblings_file)?.intersection(&online);
        pus.insert(cpu);
        let cores = packages.entry(package).or_default();
        if !cores.contains(&pus) {
            cores.push(pus);
        }
    }
    if package_minus_one {
        m.assumptions.push(
            "the kernel gives no package id (physical_package_id -1); all cpus put in package 0"
                .to_string(),
        );
    }
    m.packages = packages
        .into_iter()
        .map(|(id, cores)| Package {
            id,
            cores: cores.into_iter().map(|pus| Core { pus }).collect(),
        })
        .collect();

    // Caches and frequency.
    let mut unknown_line = 0;
    let mut max_khz: Option<u64> = None;
    for cpu in &online {
        let cache_dir = format!("{cpu_dir}/cpu{cpu}/cache");
        for index in fs.numbered_entries(&cache_dir, "index")? {
            let dir = format!("{cache_dir}/index{index}");
            if let Some(cache) = read_cache(&fs, &dir, cpu, &online, &mut unknown_line)? {
                if !m.caches.contains(&cache) {
                    m.caches.push(cache);
                }
            }
        }
        let freq_file = format!("{cpu_dir}/cpu{cpu}/cpufreq/cpuinfo_max_freq");
        if let Some(text) = fs.read_opt(&freq_file)? {
            let khz = fs.number(&freq_file, &text)?;
            max_khz = Some(max_khz.map_or(khz, |k| k.max(khz)));
        }
    }
    if unknown_line > 0 {
        m.assumptions.push(format!(
            "sysfs gives no coherency_line_size for {unknown_line} cache files; assumed 64 bytes"
        ));
    }
    m.frequency_mhz = max_khz.filter(|k| *k > 0).map(|k| k as f64 / 1000.0);

    // Nodes and distances.
    let node_dir = "sys/devices/system/node";
    if fs.path(node_dir).is_dir() {
        let ids = fs.numbered_entries(node_dir, "node")?;
        let mut rows = Vec::new();
        for &id in &ids {
            let dir = format!("{node_dir}/node{id}");
            let cpus = fs.cpulist(&format!("{dir}/cpulist"))?.intersection(&online);
            let meminfo = format!("{dir}/meminfo");
            let memory_bytes = fs.mem_total(&meminfo)?;
            let distance_file = format!("{dir}/distance");
            let row = match fs.read_opt(&distance_file)? {
                Some(text) => Some(
                    text.split_whitespace()
                        .map(|v| {
                            v.parse::<u32>().map_err(|_| {
                                fs.error(&distance_file, format!("{v:?} is not a distance"))
                            })
                        })
                        .collect::<Result<Vec<u32>>>()?,
                ),
                None => None,
            };
            if let Some(row) = &row {
                if row.len() != ids.len() {
                    return Err(fs.error(
                        &distance_file,
                        format!(
                            "{} distances for {} nodes; expected one per node directory",
                            row.len(),
                            ids.len()
                        ),
                    ));
                }
            }
            rows.push(row);
            m.nodes.push(Node {
                id,
                memory_bytes,
                cpus,
            });
        }
        if m.nodes.is_empty() {
            return Err(fs.error(node_dir, "has no node* directory"));
        }
        let matrix: Option<Matrix<u32>> = rows.into_iter().collect();
        // Nodes with neither cpus nor memory (possible but unpopulated) are left out.
        let keep: Vec<bool> = m
            .nodes
            .iter()
            .map(|n| !n.cpus.is_empty() || n.memory_bytes > 0)
            .collect();
        for (n, _) in m.nodes.iter().zip(&keep).filter(|(_, k)| !**k) {
            m.assumptions.push(format!(
                "node {} has neither cpus nor memory; left out",
                n.id
            ));
        }
        m.distances = matrix.map(|rows| {
            rows.into_iter()
                .zip(&keep)
                .filter(|(_, k)| **k)
                .map(|(row, _)| {
                    row.into_iter()
                        .zip(&keep)
                        .filter(|(_, k)| **k)
                        .map(|(v, _)| v)
                        .collect()
                })
                .collect()
        });
        let mut keep = keep.into_iter();
        m.nodes.retain(|_| keep.next().unwrap_or(true));
        if m.nodes.len() < 2 {
            // A 1x1 matrix says nothing; hwloc drops it too, so both discoveries agree.
            m.distances = None;
        }
    } else {
        m.nodes.push(Node {
            id: 0,
            memory_bytes: fs.mem_total("proc/meminfo")?,
            cpus: online.clone(),
        });
    }

    m.normalize();
    crate::file::check(&m, &origin)?;
    Ok(m)
}

/// One `cache/indexN` directory of a cpu; `None` for caches numaff does not model (no size, a type
/// other than Data, Instruction or Unified).
fn read_cache(
    fs: &Tree<'_>,
    dir: &str,
    cpu: u32,
    online: &CpuSet,
    unknown_line: &mut usize,
) -> Result<Option<Cache>> {
    let type_file = format!("{dir}/type");
    let kind = match fs.read(&type_file)?.trim() {
        "Data" => CacheKind::Data,
        "Instruction" => CacheKind::Instruction,
        "Unified" => CacheKind::Unified,
        _ => return Ok(None),
    };
    let level_file = format!("{dir}/level");
    let level_text = fs.read(&level_file)?;
    let level = u8::try_from(fs.number(&level_file, &level_text)?)
        .map_err(|_| fs.error(&level_file, "is not a cache level"))?;
    let size_file = format!("{dir}/size");
    let Some(size_text) = fs.read_opt(&size_file)? else {
        return Ok(None);
    };
    let size_bytes = parse_size(&size_text).ok_or_else(|| {
        fs.error(
            &size_file,
            format!("{:?} is not a size such as 32K", size_text.trim()),
        )
    })?;
    if size_bytes == 0 {
        return Ok(None);
    }
    let line_file = format!("{dir}/coherency_line_size");
    let line_bytes = match fs.read_opt(&line_file)? {
        Some(text) => u32::try_from(fs.number(&line_file, &text)?)
            .map_err(|_| fs.error(&line_file, "is not a line size"))?,
        None => {
            *unknown_line += 1;
            64
        }
    };
    let ways_file = format!("{dir}/ways_of_associativity");
    let associativity = match fs.read_opt(&ways_file)? {
        Some(text) => match fs.number(&ways_file, &text)? {
            0 => None,
            w => Some(u32::try_from(w).map_err(|_| fs.error(&ways_file, "is not a way count"))?),
        },
        None => None,
    };
    let shared_file = format!("{dir}/shared_cpu_list");
    let mut cpus = match fs.read_opt(&shared_file)? {
        Some(text) => CpuSet::parse(&text)
            .map_err(|e| fs.error(&shared_file, e.to_string()))?
            .intersection(online),
        None => CpuSet::new(),
    };
    cpus.insert(cpu);
    Ok(Some(Cache {
        level,
        kind,
        size_bytes,
        line_bytes,
        associativity,
        latency_cycles: None,
        cpus,
    }))
}

/// A cache size as sysfs writes it: "32K", "1024K", "32M" (binary units), or plain bytes.
fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let value: u64 = t[..digits].parse().ok()?;
    let unit = match t[digits..]
        .trim()
        .trim_end_matches(['B', 'b'])
        .trim_end_matches('i')
    {
        "" => 1,
        "K" | "k" => 1 << 10,
        "M" | "m" => 1 << 20,
        "G" | "g" => 1 << 30,
        _ => return None,
    };
    value.checked_mul(unit)
}

fn machine_name(fs: &Tree<'_>, root: &Path) -> String {
    fs.read_opt("proc/sys/kernel/hostname")
        .ok()
        .flatten()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| {
            root.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "localhost".to_string())
}

fn model_name(fs: &Tree<'_>) -> Option<String> {
    cpuinfo_field(fs, "model name")
}

/// The first non-empty value of `key` in `proc/cpuinfo`, if the file is there.
fn cpuinfo_field(fs: &Tree<'_>, key: &str) -> Option<String> {
    let cpuinfo = fs.read_opt("proc/cpuinfo").ok().flatten()?;
    cpuinfo
        .lines()
        .find_map(|l| {
            let (k, value) = l.split_once(':')?;
            (k.trim() == key).then(|| value.trim().to_string())
        })
        .filter(|s| !s.is_empty())
}

/// Files under a root, read with errors that name the file.
struct Tree<'a> {
    root: &'a Path,
}

impl Tree<'_> {
    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn error(&self, rel: &str, problem: impl Into<String>) -> MachineError {
        MachineError::Sysfs {
            path: self.path(rel),
            problem: problem.into(),
        }
    }

    fn read(&self, rel: &str) -> Result<String> {
        std::fs::read_to_string(self.path(rel)).map_err(|e| {
            let problem = if e.kind() == std::io::ErrorKind::NotFound {
                "missing; is this a Linux system with sysfs mounted on /sys?".to_string()
            } else {
                format!("cannot be read: {e}")
            };
            self.error(rel, problem)
        })
    }

    fn read_opt(&self, rel: &str) -> Result<Option<String>> {
        match std::fs::read_to_string(self.path(rel)) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.error(rel, format!("cannot be read: {e}"))),
        }
    }

    fn number(&self, rel: &str, text: &str) -> Result<u64> {
        text.trim()
            .parse()
            .map_err(|_| self.error(rel, format!("{:?} is not a number", text.trim())))
    }

    fn cpulist(&self, rel: &str) -> Result<CpuSet> {
        CpuSet::parse(&self.read(rel)?).map_err(|e| self.error(rel, e.to_string()))
    }

    /// MemTotal of a meminfo file ("MemTotal: N kB" or "Node 0 MemTotal: N kB"), in bytes.
    fn mem_total(&self, rel: &str) -> Result<u64> {
        let text = self.read(rel)?;
        let line = text
            .lines()
            .find(|l| l.contains("MemTotal:"))
            .ok_or_else(|| self.error(rel, "has no MemTotal line"))?;
        let after = line.split("MemTotal:").nth(1).unwrap_or_default();
        let mut words = after.split_whitespace();
        let value = words
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| self.error(rel, format!("cannot read the size in {:?}", line.trim())))?;
        let unit: u64 = match words.next() {
            Some("kB") | Some("KB") | Some("kiB") => 1024,
            None => 1,
            Some(u) => {
                return Err(self.error(rel, format!("unknown unit {u:?} in {:?}", line.trim())))
            }
        };
        Ok(value.saturating_mul(unit))
    }

    /// The N of the entries named PREFIX<N> in a directory, sorted; empty if it does not exist.
    fn numbered_entries(&self, rel: &str, prefix: &str) -> Result<Vec<u32>> {
        let dir = match std::fs::read_dir(self.path(rel)) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.error(rel, format!("cannot be listed: {e}"))),
        };
        let mut ids: Vec<u32> = dir
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_prefix(prefix)?
                    .parse::<u32>()
                    .ok()
            })
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cache_sizes() {
        assert_eq!(parse_size("32K\n"), Some(32 << 10));
        assert_eq!(parse_size("1024K"), Some(1 << 20));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("48KiB"), Some(48 << 10));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size("12Q"), None);
    }

    #[test]
    fn page_size_is_a_power_of_two() {
        assert!(system_page_size().is_power_of_two());
    }
}
