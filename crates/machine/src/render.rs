//! Human-readable views of a machine: the tree (nodes → packages → caches → cores → PUs), the
//! matrices, the derived figures. Pure functions returning text, so the CLI and snapshots share them.

use std::fmt::Write as _;

use crate::cpuset::CpuSet;
use crate::file::Size;
use crate::model::{Cache, CacheKind, FactorSource, Machine, Matrix};

/// The whole `numaff topo` text: header, tree, matrices and derived figures.
pub fn topology(m: &Machine) -> String {
    let mut out = header(m);
    out.push('\n');
    for line in tree(m) {
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(&figures(m));
    out
}

/// The first lines: name, counts, source.
pub fn header(m: &Machine) -> String {
    let s = m.summary();
    let mut out = format!(
        "Machine {}: {} node{}, {} package{}, {} cores, {} PUs, {} memory, {} pages",
        m.name,
        s.nodes,
        plural(s.nodes),
        s.packages,
        plural(s.packages),
        s.cores,
        s.pus,
        Size(s.memory_bytes).human(),
        Size(m.page_size).human()
    );
    if let Some(f) = m.frequency_mhz {
        let _ = write!(out, ", {f} MHz");
    }
    if let Some(c) = m.coherence {
        let _ = write!(out, ", {} coherence", c.name());
    }
    out.push('\n');
    if let Some(d) = &m.description {
        let _ = writeln!(out, "  {d}");
    }
    if let Some(src) = &m.source {
        let _ = writeln!(out, "  source: {src}");
    }
    for a in &m.assumptions {
        let _ = writeln!(out, "  assumed: {a}");
    }
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// One short line of counts, for narrow columns: "4 nodes, 8 cores, 8 PUs, 8 GiB".
pub fn brief(m: &Machine) -> String {
    let s = m.summary();
    format!(
        "{} node{}, {} cores, {} PUs, {}",
        s.nodes,
        plural(s.nodes),
        s.cores,
        s.pus,
        Size(s.memory_bytes).human()
    )
}

/// One level of the tree below a node: each set of PUs and how it is labelled.
struct Level {
    groups: Vec<(String, CpuSet)>,
}

fn levels(m: &Machine) -> Vec<Level> {
    let mut levels = vec![Level {
        groups: m
            .packages
            .iter()
            .map(|p| {
                let cpus = p.cores.iter().flat_map(|c| c.pus.iter()).collect();
                (format!("Package {}", p.id), cpus)
            })
            .collect(),
    }];
    let max_level = m.caches.iter().map(|c| c.level).max().unwrap_or(0);
    for level in (1..=max_level).rev() {
        let at: Vec<&Cache> = m.caches.iter().filter(|c| c.level == level).collect();
        // Data and unified caches make the tree; an instruction cache joins the line of the data
        // cache with the same PUs, or stands alone when there is none.
        let mut groups: Vec<(String, CpuSet)> = Vec::new();
        for c in at.iter().filter(|c| c.kind != CacheKind::Instruction) {
            let mut label = cache_label(c);
            if let Some(i) = at
                .iter()
                .find(|i| i.kind == CacheKind::Instruction && i.cpus == c.cpus)
            {
                let twin = Cache {
                    kind: CacheKind::Data,
                    ..(*i).clone()
                };
                if twin == **c {
                    // Same size and attributes: one label for both halves.
                    label =
                        label.replacen(&format!("L{}d", c.level), &format!("L{}d+i", c.level), 1);
                } else {
                    let _ = write!(label, " + {}", cache_label(i));
                }
            }
            groups.push((label, c.cpus.clone()));
        }
        for i in at.iter().filter(|c| c.kind == CacheKind::Instruction) {
            if !groups.iter().any(|(_, s)| *s == i.cpus) {
                groups.push((cache_label(i), i.cpus.clone()));
            }
        }
        if !groups.is_empty() {
            levels.push(Level { groups });
        }
    }
    levels
}

fn cache_label(c: &Cache) -> String {
    let mut s = format!(
        "L{}{} {}",
        c.level,
        c.kind.suffix(),
        Size(c.size_bytes).human()
    );
    let mut attrs = Vec::new();
    match c.associativity {
        Some(0) => attrs.push("fully assoc.".to_string()),
        Some(w) => attrs.push(format!("{w}-way")),
        None => {}
    }
    if c.line_bytes != 64 {
        attrs.push(format!("{} B lines", c.line_bytes));
    }
    if let Some(l) = c.latency_cycles {
        attrs.push(format!("{l} cycle{}", if l == 1.0 { "" } else { "s" }));
    }
    if !attrs.is_empty() {
        let _ = write!(s, " ({})", attrs.join(", "));
    }
    s
}

/// The tree, one line per object: nodes, then the packages, caches and cores holding their PUs.
pub fn tree(m: &Machine) -> Vec<String> {
    let levels = levels(m);
    let mut core_index = std::collections::HashMap::new();
    for (i, (_, c)) in m.cores().enumerate() {
        if let Some(first) = c.pus.first() {
            core_index.insert(first, i);
        }
    }
    let mut lines = Vec::new();
    for node in &m.nodes {
        let mut label = format!("Node {} ({}", node.id, Size(node.memory_bytes).human());
        if node.cpus.is_empty() {
            label.push_str(", no cpus");
        } else {
            let _ = write!(label, ", cpus {}", node.cpus);
        }
        label.push(')');
        lines.push(label);
        walk(m, &levels, 0, &node.cpus, "", &core_index, &mut lines);
    }
    lines
}

fn walk(
    m: &Machine,
    levels: &[Level],
    depth: usize,
    within: &CpuSet,
    prefix: &str,
    core_index: &std::collections::HashMap<u32, usize>,
    lines: &mut Vec<String>,
) {
    if within.is_empty() {
        return;
    }
    let children: Vec<(String, CpuSet)> = match levels.get(depth) {
        Some(level) => level
            .groups
            .iter()
            .filter(|(_, s)| s.intersects(within))
            .map(|(l, s)| (l.clone(), s.intersection(within)))
            .collect(),
        None => m
            .cores()
            .filter(|(_, c)| c.pus.intersects(within))
            .map(|(_, c)| {
                let idx = c
                    .pus
                    .first()
                    .and_then(|f| core_index.get(&f))
                    .copied()
                    .unwrap_or(0);
                let pus = c.pus.intersection(within);
                let noun = if pus.len() == 1 { "PU" } else { "PUs" };
                (format!("Core {idx}: {noun} {pus}"), CpuSet::new())
            })
            .collect(),
    };
    let last = children.len().saturating_sub(1);
    for (i, (label, set)) in children.into_iter().enumerate() {
        let (branch, cont) = if i == last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        lines.push(format!("{prefix}{branch}{label}"));
        if depth < levels.len() {
            walk(
                m,
                levels,
                depth + 1,
                &set,
                &format!("{prefix}{cont}"),
                core_index,
                lines,
            );
        }
    }
}

/// Distances, latency and bandwidth matrices, NUMA factor and interconnect.
pub fn figures(m: &Machine) -> String {
    let mut out = String::new();
    let ids: Vec<u32> = m.nodes.iter().map(|n| n.id).collect();
    if let Some(d) = &m.distances {
        let as_f: Matrix<f64> = d
            .iter()
            .map(|r| r.iter().map(|&v| f64::from(v)).collect())
            .collect();
        out.push('\n');
        out.push_str(&matrix("Distances (SLIT, local = 10)", &ids, &as_f, 0));
    }
    if let Some(l) = &m.latency_ns {
        out.push('\n');
        out.push_str(&matrix("Latency (ns), cpu node → memory node", &ids, l, 1));
    }
    if let Some(b) = &m.bandwidth_mbps {
        out.push('\n');
        out.push_str(&matrix(
            "Bandwidth (MB/s), cpu node → memory node",
            &ids,
            b,
            0,
        ));
    }
    out.push('\n');
    match m.numa_factor() {
        Some(f) => {
            let from = match f.source {
                FactorSource::Latency => "latency matrix",
                FactorSource::Distances => "distances",
            };
            if (f.max - f.min).abs() < 0.005 {
                let _ = writeln!(out, "NUMA factor: {:.2} (from the {from})", f.max);
            } else {
                let _ = writeln!(
                    out,
                    "NUMA factor: {:.2}–{:.2}, mean {:.2} (from the {from})",
                    f.min, f.max, f.mean
                );
            }
        }
        None if m.nodes.len() <= 1 => {
            let _ = writeln!(out, "NUMA factor: 1 (a single node: every access is local)");
        }
        None => {
            let _ = writeln!(out, "NUMA factor: unknown (no distances or latency matrix)");
        }
    }
    if let Some(ic) = &m.interconnect {
        let kind = ic.kind.as_deref().unwrap_or("links");
        let _ = write!(
            out,
            "Interconnect: {kind}, {} link{}",
            ic.links.len(),
            plural(ic.links.len())
        );
        if let Some(bw) = ic.link_bandwidth_mbps {
            let _ = write!(out, ", {bw} MB/s per link");
        }
        if let Some(h) = ic.hop_latency_ns {
            let _ = write!(out, ", {h} ns per hop");
        }
        out.push('\n');
        if let Some(per) = m.links_per_node() {
            let list: Vec<String> = ids
                .iter()
                .zip(&per)
                .map(|(id, n)| format!("node {id}: {n}"))
                .collect();
            let _ = writeln!(out, "Links per node: {}", list.join(", "));
        }
    }
    out
}

/// A labelled square matrix with node ids as row and column headers.
pub fn matrix(title: &str, ids: &[u32], values: &Matrix<f64>, decimals: usize) -> String {
    let cells: Vec<Vec<String>> = values
        .iter()
        .map(|r| r.iter().map(|v| format!("{v:.decimals$}")).collect())
        .collect();
    let width = cells
        .iter()
        .flatten()
        .map(|s| s.len())
        .chain(ids.iter().map(|i| format!("node{i}").len()))
        .max()
        .unwrap_or(4);
    let mut out = format!("{title}:\n{:>7}", "");
    for id in ids {
        let _ = write!(out, " {:>width$}", format!("node{id}"));
    }
    out.push('\n');
    for (id, row) in ids.iter().zip(&cells) {
        let _ = write!(out, "{:>7}", format!("node{id}"));
        for c in row {
            let _ = write!(out, " {c:>width$}");
        }
        out.push('\n');
    }
    out
}

/// Two blocks of text side by side, the left padded to its widest line.
pub fn side_by_side(left: &str, right: &str, gap: usize) -> String {
    let l: Vec<&str> = left.lines().collect();
    let r: Vec<&str> = right.lines().collect();
    let width = l.iter().map(|s| s.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for i in 0..l.len().max(r.len()) {
        let a = l.get(i).copied().unwrap_or("");
        let b = r.get(i).copied().unwrap_or("");
        let pad = width - a.chars().count() + gap;
        let line = format!("{a}{}{b}", " ".repeat(pad));
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
