//! Writing a machine as hwloc 2 XML (`numaff topo --export FILE.xml`), which lstopo, hwloc-calc
//! and `numaff topo --from-hwloc` read: packages, caches, cores, PUs, NUMA nodes and distances.

use std::fmt::Write as _;
use std::path::Path;

use crate::cpuset::CpuSet;
use crate::error::{FieldProblem, MachineError, Result};
use crate::model::{CacheKind, Machine};

/// One object of the tree being built.
struct Obj {
    /// hwloc's type name (`Package`, `L3Cache`, `Core`, `PU`, ...).
    kind: String,
    /// Order among objects with the same cpus: outer first.
    rank: u32,
    cpus: CpuSet,
    /// Attributes other than the cpusets, nodesets and gp_index.
    attrs: String,
    children: Vec<usize>,
    /// Indexes into the machine's nodes.
    memory: Vec<usize>,
}

/// The machine as hwloc 2 XML text; an error when its objects do not nest (a cache or node that
/// straddles two packages partly), which hwloc's tree cannot hold.
pub fn to_xml_string(m: &Machine) -> Result<String> {
    let problem = |field: String, what: String| MachineError::Invalid {
        file: m.name.clone(),
        problems: vec![FieldProblem::new(field, what)],
    };
    let all = m.pus();
    let mut objs = vec![Obj {
        kind: "Machine".into(),
        rank: 0,
        cpus: all.clone(),
        attrs: " os_index=\"0\"".into(),
        children: Vec::new(),
        memory: Vec::new(),
    }];
    let mut rest: Vec<Obj> = Vec::new();
    let mut core_index = 0u32;
    for p in &m.packages {
        let cpus = p
            .cores
            .iter()
            .fold(CpuSet::new(), |acc, c| acc.union(&c.pus));
        rest.push(Obj {
            kind: "Package".into(),
            rank: 1,
            cpus,
            attrs: format!(" os_index=\"{}\"", p.id),
            children: Vec::new(),
            memory: Vec::new(),
        });
        for c in &p.cores {
            rest.push(Obj {
                kind: "Core".into(),
                rank: 100,
                cpus: c.pus.clone(),
                attrs: format!(" os_index=\"{core_index}\""),
                children: Vec::new(),
                memory: Vec::new(),
            });
            core_index += 1;
            for pu in c.pus.iter() {
                rest.push(Obj {
                    kind: "PU".into(),
                    rank: 101,
                    cpus: std::iter::once(pu).collect(),
                    attrs: format!(" os_index=\"{pu}\""),
                    children: Vec::new(),
                    memory: Vec::new(),
                });
            }
        }
    }
    for c in &m.caches {
        let (suffix, cache_type) = match c.kind {
            CacheKind::Unified => ("", 0),
            CacheKind::Data => ("", 1),
            CacheKind::Instruction => ("i", 2),
        };
        rest.push(Obj {
            kind: format!("L{}{suffix}Cache", c.level),
            // Higher levels outside lower ones; an instruction cache inside the data cache.
            rank: 2 + 2 * (40 - u32::from(c.level.min(40))) + u32::from(cache_type == 2),
            cpus: c.cpus.clone(),
            attrs: format!(
                " cache_size=\"{}\" depth=\"{}\" cache_linesize=\"{}\" cache_associativity=\"{}\" \
                 cache_type=\"{cache_type}\"",
                c.size_bytes,
                c.level,
                c.line_bytes,
                c.associativity.unwrap_or(0)
            ),
            children: Vec::new(),
            memory: Vec::new(),
        });
    }
    // Largest first, then outer first: each goes under the deepest object that holds it.
    rest.sort_by(|a, b| b.cpus.len().cmp(&a.cpus.len()).then(a.rank.cmp(&b.rank)));
    for o in rest {
        if o.cpus.is_empty() {
            continue;
        }
        let parent = place(&objs, &o.cpus)
            .map_err(|other| problem(format!("{} {}", o.kind, o.cpus), other))?;
        let i = objs.len();
        objs.push(o);
        objs[parent].children.push(i);
    }
    for (n, node) in m.nodes.iter().enumerate() {
        let mut parent = if node.cpus.is_empty() {
            0
        } else {
            place(&objs, &node.cpus).map_err(|other| problem(format!("node {}", node.id), other))?
        };
        if !node.cpus.is_empty() && objs[parent].cpus != node.cpus {
            // A node over several objects (packages) and less than their parent: a Group of them
            // holds it, so that hwloc gives each PU its node.
            let (inside, outside): (Vec<usize>, Vec<usize>) = objs[parent]
                .children
                .iter()
                .partition(|&&c| objs[c].cpus.is_subset(&node.cpus));
            let group = objs.len();
            objs.push(Obj {
                kind: "Group".into(),
                rank: 1,
                cpus: node.cpus.clone(),
                attrs: String::new(),
                children: inside,
                memory: Vec::new(),
            });
            objs[parent].children = outside;
            objs[parent].children.push(group);
            parent = group;
        }
        objs[parent].memory.push(n);
    }

    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\">\n",
    );
    let mut gp = 1u64;
    write_obj(m, &objs, 0, 1, &mut gp, &mut out);
    if let Some(d) = &m.distances {
        if d.len() == m.nodes.len() && d.iter().all(|r| r.len() == m.nodes.len()) {
            let indexes: String = m.nodes.iter().map(|n| format!("{} ", n.id)).collect();
            let values: String = d.iter().flatten().map(|v| format!("{v} ")).collect();
            let _ = writeln!(
                out,
                "  <distances2 type=\"NUMANode\" nbobjs=\"{}\" kind=\"5\" name=\"NUMALatency\" \
                 indexing=\"os\">\n    <indexes length=\"{}\">{indexes}</indexes>\n    \
                 <u64values length=\"{}\">{values}</u64values>\n  </distances2>",
                m.nodes.len(),
                indexes.len(),
                values.len()
            );
        }
    }
    out.push_str("</topology>\n");
    Ok(out)
}

/// The deepest object whose cpus hold `cpus` (objects inside `cpus` may be below it); else (Err)
/// the object it straddles, in words.
fn place(objs: &[Obj], cpus: &CpuSet) -> std::result::Result<usize, String> {
    let mut at = 0;
    'down: loop {
        for &c in &objs[at].children {
            let o = &objs[c];
            if cpus.is_subset(&o.cpus) {
                at = c;
                continue 'down;
            }
            if cpus.intersects(&o.cpus) && !o.cpus.is_subset(cpus) {
                return Err(format!(
                    "straddles {} {}: hwloc XML cannot hold objects that overlap in part; \
                     export to a .toml machine file instead",
                    o.kind, o.cpus
                ));
            }
        }
        return Ok(at);
    }
}

fn write_obj(m: &Machine, objs: &[Obj], i: usize, indent: usize, gp: &mut u64, out: &mut String) {
    let o = &objs[i];
    let pad = "  ".repeat(indent);
    let nodes: CpuSet = m
        .nodes
        .iter()
        .filter(|n| n.cpus.intersects(&o.cpus) || (i == 0))
        .map(|n| n.id)
        .collect();
    let cpus = hex_set(&o.cpus);
    let ns = hex_set(&nodes);
    let _ = write!(
        out,
        "{pad}<object type=\"{}\"{} cpuset=\"{cpus}\" complete_cpuset=\"{cpus}\"{} \
         nodeset=\"{ns}\" complete_nodeset=\"{ns}\"{} gp_index=\"{gp}\"",
        o.kind,
        o.attrs,
        if i == 0 {
            format!(" allowed_cpuset=\"{cpus}\"")
        } else {
            String::new()
        },
        if i == 0 {
            format!(" allowed_nodeset=\"{ns}\"")
        } else {
            String::new()
        },
    );
    *gp += 1;
    if o.children.is_empty() && o.memory.is_empty() && i != 0 {
        out.push_str("/>\n");
        return;
    }
    out.push_str(">\n");
    if i == 0 {
        let _ = writeln!(
            out,
            "{pad}  <info name=\"HostName\" value=\"{}\"/>",
            escape(&m.name)
        );
    }
    for &n in &o.memory {
        let node = &m.nodes[n];
        let cpus = if node.cpus.is_empty() {
            "0x0".to_string()
        } else {
            hex_set(&node.cpus)
        };
        let ns = hex_set(&std::iter::once(node.id).collect());
        let pages = if m.page_size > 0 {
            format!(
                "\n{pad}    <page_type size=\"{}\" count=\"{}\"/>\n{pad}  </object>",
                m.page_size,
                node.memory_bytes / m.page_size
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{pad}  <object type=\"NUMANode\" os_index=\"{}\" cpuset=\"{cpus}\" \
             complete_cpuset=\"{cpus}\" nodeset=\"{ns}\" complete_nodeset=\"{ns}\" \
             gp_index=\"{gp}\" local_memory=\"{}\"{}",
            node.id,
            node.memory_bytes,
            if pages.is_empty() { "/>" } else { ">" }.to_string() + &pages
        );
        *gp += 1;
    }
    for &c in &o.children {
        write_obj(m, objs, c, indent + 1, gp, out);
    }
    let _ = writeln!(out, "{pad}</object>");
}

/// A set as hwloc writes it: 32-bit words in hex, the highest first, separated by commas.
fn hex_set(s: &CpuSet) -> String {
    let Some(max) = s.iter().next_back() else {
        return "0x0".into();
    };
    let words = max as usize / 32 + 1;
    let mut w = vec![0u32; words];
    for b in s.iter() {
        w[b as usize / 32] |= 1 << (b % 32);
    }
    w.iter()
        .rev()
        .map(|x| format!("0x{x:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes the machine as hwloc XML to `path` (atomically).
pub fn save(m: &Machine, path: &Path) -> Result<()> {
    let text = to_xml_string(m)?;
    crate::write_atomic(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::hex_set;
    use crate::cpuset::CpuSet;

    #[test]
    fn sets_are_written_as_hwloc_writes_them() {
        let s: CpuSet = [0, 1, 33].into_iter().collect();
        assert_eq!(hex_set(&s), "0x00000002,0x00000003");
        assert_eq!(hex_set(&CpuSet::new()), "0x0");
    }
}
