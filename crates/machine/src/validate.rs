//! Consistency checks of a [`Machine`], whatever it was read from (file, hwloc, sysfs).
//! Problems are named by the machine-file field they concern, so a user can find and fix them.

use std::collections::HashMap;

use crate::error::FieldProblem;
use crate::model::{Machine, Matrix};

/// Most PUs of a machine, and the bound of its PU ids: Linux's largest `NR_CPUS` (8192, x86's
/// `MAXSMP`) bounds the cpus of every machine it runs on, and the largest single-system-image
/// machines (HPE Superdome Flex, SGI UV) stay below it. Checked before anything is sized by a
/// description, file or hwloc XML.
pub const MAX_PUS: usize = 8192;

/// Most NUMA nodes of a machine, and the bound of its node ids: Linux's largest `MAX_NUMNODES`
/// (1024, `CONFIG_NODES_SHIFT` 10); every real machine has far fewer. Checked with [`MAX_PUS`].
pub const MAX_NODES: usize = 1024;

/// The problem, if any, of a machine with `pus` PUs and `nodes` nodes whose largest PU and node
/// ids are `max_pu_id` and `max_node_id`: one beyond [`MAX_PUS`] or [`MAX_NODES`], as a field
/// problem naming the value, the cap and what to do.
pub fn size_problem(
    pus: usize,
    max_pu_id: Option<u64>,
    nodes: usize,
    max_node_id: Option<u64>,
) -> Option<FieldProblem> {
    let fix = "describe a real machine (or part of one)";
    if pus > MAX_PUS {
        return Some(FieldProblem::new(
            "cpus",
            format!("{pus} PUs; numaff takes at most {MAX_PUS} (Linux's largest NR_CPUS): {fix}"),
        ));
    }
    if let Some(id) = max_pu_id.filter(|&id| id >= MAX_PUS as u64) {
        return Some(FieldProblem::new(
            "cpus",
            format!("PU id {id}; PU ids must be below {MAX_PUS} (Linux's largest NR_CPUS): {fix}"),
        ));
    }
    if nodes > MAX_NODES {
        return Some(FieldProblem::new(
            "node",
            format!(
                "{nodes} NUMA nodes; numaff takes at most {MAX_NODES} (Linux's largest \
                 MAX_NUMNODES): {fix}"
            ),
        ));
    }
    if let Some(id) = max_node_id.filter(|&id| id >= MAX_NODES as u64) {
        return Some(FieldProblem::new(
            "node",
            format!(
                "node id {id}; node ids must be below {MAX_NODES} (Linux's largest \
                 MAX_NUMNODES): {fix}"
            ),
        ));
    }
    None
}

/// Every problem of the machine; empty when it is consistent.
pub fn problems(m: &Machine) -> Vec<FieldProblem> {
    let mut out = Vec::new();
    let pus = m.pus();
    let size = size_problem(
        pus.len(),
        pus.last().map(u64::from),
        m.nodes.len(),
        m.nodes.iter().map(|n| u64::from(n.id)).max(),
    );
    if let Some(p) = size {
        // The other checks are sized by the machine: none on one beyond the caps.
        return vec![p];
    }
    check_header(m, &mut out);
    check_nodes(m, &mut out);
    check_cores(m, &mut out);
    check_caches(m, &mut out);
    let n = m.nodes.len();
    if let Some(d) = &m.distances {
        check_shape("distances", d, n, &mut out);
        for (r, row) in d.iter().enumerate() {
            for (c, &v) in row.iter().enumerate() {
                if v == 0 && r != c {
                    out.push(FieldProblem::new(
                        format!("distances[{r}][{c}]"),
                        "zero off the diagonal; a remote distance must be larger than the local one (SLIT: local 10)",
                    ));
                } else if v == 0 {
                    out.push(FieldProblem::new(
                        format!("distances[{r}][{c}]"),
                        "zero on the diagonal; the local distance is 10 in SLIT units",
                    ));
                }
            }
        }
    }
    for (name, matrix) in [
        ("latency_ns", &m.latency_ns),
        ("bandwidth_mbps", &m.bandwidth_mbps),
    ] {
        let Some(matrix) = matrix else { continue };
        check_shape(name, matrix, n, &mut out);
        for (r, row) in matrix.iter().enumerate() {
            for (c, &v) in row.iter().enumerate() {
                let field = format!("{name}[{r}][{c}]");
                if !v.is_finite() {
                    out.push(FieldProblem::new(
                        field,
                        format!("{v} is not a finite number"),
                    ));
                } else if v < 0.0 {
                    out.push(FieldProblem::new(field, format!("{v} is negative")));
                } else if v == 0.0 && !m.nodes.get(r).is_some_and(|n| n.cpus.is_empty()) {
                    // Rows of memory-only nodes may stay 0: no cpu there to measure from.
                    out.push(FieldProblem::new(field, "zero; give the measured value"));
                }
            }
        }
    }
    if let Some(ic) = &m.interconnect {
        for (i, &(a, b)) in ic.links.iter().enumerate() {
            let field = format!("interconnect.links[{i}]");
            for end in [a, b] {
                if m.node_index(end).is_none() {
                    out.push(FieldProblem::new(
                        field.clone(),
                        format!("node {end} does not exist"),
                    ));
                }
            }
            if a == b {
                out.push(FieldProblem::new(
                    field,
                    format!("links node {a} to itself"),
                ));
            }
        }
        for (field, v) in [
            ("interconnect.link_bandwidth_mbps", ic.link_bandwidth_mbps),
            ("interconnect.hop_latency_ns", ic.hop_latency_ns),
        ] {
            if let Some(v) = v {
                if !v.is_finite() || v < 0.0 {
                    out.push(FieldProblem::new(
                        field,
                        format!("{v} is negative or not a number"),
                    ));
                }
            }
        }
    }
    out
}

fn check_header(m: &Machine, out: &mut Vec<FieldProblem>) {
    if m.name.trim().is_empty() {
        out.push(FieldProblem::new("name", "empty; give the machine a name"));
    }
    if m.page_size < 1024 || !m.page_size.is_power_of_two() {
        out.push(FieldProblem::new(
            "page_size",
            format!("{} is not a power of two of at least 1 KiB", m.page_size),
        ));
    }
    if let Some(f) = m.frequency_mhz {
        if !f.is_finite() || f <= 0.0 {
            out.push(FieldProblem::new(
                "frequency_mhz",
                format!("{f} is not a positive number"),
            ));
        }
    }
}

fn check_nodes(m: &Machine, out: &mut Vec<FieldProblem>) {
    if m.nodes.is_empty() {
        out.push(FieldProblem::new(
            "node",
            "the machine has no NUMA node; add at least one [[node]]",
        ));
    }
    let mut ids: HashMap<u32, usize> = HashMap::new();
    let mut owner: HashMap<u32, usize> = HashMap::new();
    for (i, node) in m.nodes.iter().enumerate() {
        if let Some(j) = ids.insert(node.id, i) {
            out.push(FieldProblem::new(
                format!("node[{i}].id"),
                format!("node id {} is also used by node[{j}]", node.id),
            ));
        }
        if node.memory_bytes == 0 {
            out.push(FieldProblem::new(
                format!("node[{i}].memory"),
                "the node has no memory size; give one, e.g. memory = \"16 GiB\"",
            ));
        }
        for cpu in &node.cpus {
            if let Some(j) = owner.insert(cpu, i) {
                out.push(FieldProblem::new(
                    format!("node[{i}].cpus"),
                    format!(
                        "cpu {cpu} is also in node[{j}] (node {}); a cpu belongs to one node",
                        m.nodes[j].id
                    ),
                ));
            }
        }
    }
    if !m.nodes.is_empty() && m.nodes.iter().all(|n| n.cpus.is_empty()) {
        out.push(FieldProblem::new("node", "no node has cpus"));
    }
}

fn check_cores(m: &Machine, out: &mut Vec<FieldProblem>) {
    if m.packages.is_empty() {
        out.push(FieldProblem::new(
            "package",
            "the machine has no package; add at least one [[package]]",
        ));
    }
    let mut ids: HashMap<u32, usize> = HashMap::new();
    let mut owner: HashMap<u32, (usize, usize)> = HashMap::new();
    for (p, pkg) in m.packages.iter().enumerate() {
        if let Some(q) = ids.insert(pkg.id, p) {
            out.push(FieldProblem::new(
                format!("package[{p}].id"),
                format!("package id {} is also used by package[{q}]", pkg.id),
            ));
        }
        if pkg.cores.is_empty() {
            out.push(FieldProblem::new(
                format!("package[{p}].cores"),
                "the package has no core",
            ));
        }
        for (c, core) in pkg.cores.iter().enumerate() {
            let field = format!("package[{p}].cores[{c}]");
            if core.pus.is_empty() {
                out.push(FieldProblem::new(field.clone(), "the core has no PU"));
            }
            for pu in &core.pus {
                if let Some((q, d)) = owner.insert(pu, (p, c)) {
                    out.push(FieldProblem::new(
                        field.clone(),
                        format!("cpu {pu} is also in package[{q}].cores[{d}]; a cpu belongs to one core"),
                    ));
                }
                if m.node_of_pu(pu).is_none() && !m.nodes.is_empty() {
                    out.push(FieldProblem::new(
                        field.clone(),
                        format!("cpu {pu} is in no node; add it to the cpus of one [[node]]"),
                    ));
                }
            }
        }
    }
    for (i, node) in m.nodes.iter().enumerate() {
        for cpu in &node.cpus {
            if !owner.contains_key(&cpu) && !m.packages.is_empty() {
                out.push(FieldProblem::new(
                    format!("node[{i}].cpus"),
                    format!("cpu {cpu} belongs to no core; add it to a core of one [[package]]"),
                ));
            }
        }
    }
}

fn check_caches(m: &Machine, out: &mut Vec<FieldProblem>) {
    let pus = m.pus();
    for (i, c) in m.caches.iter().enumerate() {
        let field = format!("cache[{i}]");
        if c.level == 0 {
            out.push(FieldProblem::new(
                format!("{field}.level"),
                "levels start at 1",
            ));
        }
        if c.size_bytes == 0 {
            out.push(FieldProblem::new(format!("{field}.size"), "size is zero"));
        }
        if c.line_bytes == 0 || !c.line_bytes.is_power_of_two() {
            out.push(FieldProblem::new(
                format!("{field}.line"),
                format!("{} is not a power of two", c.line_bytes),
            ));
        }
        if let Some(l) = c.latency_cycles {
            if !l.is_finite() || l < 0.0 {
                out.push(FieldProblem::new(
                    format!("{field}.latency_cycles"),
                    format!("{l} is negative"),
                ));
            }
        }
        if c.cpus.is_empty() {
            out.push(FieldProblem::new(
                format!("{field}.cpus"),
                "the cache is shared by no cpu",
            ));
        } else if !c.cpus.is_subset(&pus) {
            out.push(FieldProblem::new(
                format!("{field}.cpus"),
                format!(
                    "cpus {} are not PUs of any core",
                    c.cpus
                        .iter()
                        .filter(|p| !pus.contains(*p))
                        .collect::<crate::CpuSet>()
                ),
            ));
        }
    }
}

fn check_shape<T>(name: &str, matrix: &Matrix<T>, nodes: usize, out: &mut Vec<FieldProblem>) {
    if matrix.len() != nodes {
        out.push(FieldProblem::new(
            name,
            format!(
                "{} rows for {nodes} nodes; the matrix must be square, one row and column per node",
                matrix.len()
            ),
        ));
    }
    for (r, row) in matrix.iter().enumerate() {
        if row.len() != nodes {
            out.push(FieldProblem::new(
                format!("{name}[{r}]"),
                format!(
                    "{} columns for {nodes} nodes; the matrix is not square",
                    row.len()
                ),
            ));
        }
    }
}
