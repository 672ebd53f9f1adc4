//! `numaff analyze`'s text output: the coverage, the metrics and class, the heaviest pairs and the
//! page-usage pattern, with the words and number formats the HTML report shares.

use std::fmt::Write as _;
use std::path::Path;

use numaff_behave::analyze::{Analysis, CommSource};
use numaff_behave::delocprof::Class;

pub(super) fn bytes(v: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = v;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

pub(super) fn duration(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

pub(super) fn pct(v: Option<f64>) -> String {
    v.map_or("unknown".into(), |v| format!("{:.1} %", v * 100.0))
}

pub(super) fn class_name(c: Class) -> &'static str {
    match c {
        Class::NonMapping => "Non-mapping",
        Class::Static => "Static",
        Class::Dynamic => "Dynamic",
    }
}

pub(super) fn source_words(s: CommSource) -> &'static str {
    match s {
        CommSource::LoadsAndStores => "a store then a load of a 64-byte line by another thread",
        CommSource::SharingTable => {
            "faults on a 256-byte block the other thread touched last (kMAF sharing table)"
        }
        CommSource::Messages => "MPI messages, each its size in bytes",
        CommSource::None => "no samples",
    }
}

/// The heaviest pairs of the matrix, as (i, j, bytes), i < j.
fn heaviest_pairs(a: &Analysis, n: usize) -> Vec<(usize, usize, f64)> {
    let m = &a.communication_matrix;
    let mut pairs: Vec<(usize, usize, f64)> = (0..m.len())
        .flat_map(|i| (i + 1..m.len()).map(move |j| (i, j, m[i][j])))
        .filter(|p| p.2 > 0.0)
        .collect();
    pairs.sort_by(|x, y| y.2.total_cmp(&x.2).then((x.0, x.1).cmp(&(y.0, y.1))));
    pairs.truncate(n);
    pairs
}

/// `, one fault in N` when the profile sampled one fault in N (`numaff profile --sample-period`).
fn period_words(c: &numaff_behave::analyze::Coverage) -> String {
    match c.rates.get("period") {
        Some(&p) if p > 1.0 => format!(", one fault in {p:.0}"),
        _ => String::new(),
    }
}

pub(super) fn render_text(trace: &Path, a: &Analysis, interval_s: f64) -> String {
    let c = &a.coverage;
    let m = &a.metrics;
    let mut s = String::new();
    let messages = a.comm_source == CommSource::Messages;
    if messages {
        let _ = writeln!(
            s,
            "trace {}: {} MPI messages between {} ranks over {}",
            trace.display(),
            c.samples,
            a.threads.len(),
            duration(c.end_ns.saturating_sub(c.start_ns)),
        );
    } else {
        let _ = writeln!(
        s,
        "trace {}: {} samples ({} faults, {} loads, {} stores) of {} threads on {} node{} over {}{}",
        trace.display(),
        c.samples,
        c.faults,
        c.loads,
        c.stores,
        a.threads.len(),
        a.nodes,
        if a.nodes == 1 { "" } else { "s" },
        duration(c.end_ns.saturating_sub(c.start_ns)),
        c.sampler
            .as_ref()
            .map_or(String::new(), |s| format!("; sampler {s}{}", period_words(c)))
    );
    }
    if let Some(&b) = c.rates.get("thp_bytes_max").filter(|&&b| b > 0.0) {
        let _ = writeln!(
            s,
            "transparent huge pages: up to {:.1} MiB of the program's memory was in 2 MiB pages, sampled once per huge page at first touch",
            b / (1u64 << 20) as f64
        );
    }
    let _ = writeln!(
        s,
        "communication: {} events ({}), {} cluster{} in time",
        a.events,
        source_words(a.comm_source),
        a.clustering.k,
        if a.clustering.k == 1 { "" } else { "s" }
    );
    let rows = [
        (
            "Lcomm",
            bytes(m.Lcomm),
            if messages {
                "bytes exchanged between ranks (eq. 2.2)".to_string()
            } else {
                "bytes exchanged between threads, sampled (eq. 2.2)".to_string()
            },
        ),
        (
            "CommR",
            pct(m.CommR),
            if messages {
                "needs the memory volume, which messages do not give (eq. 2.3)".into()
            } else {
                "communication over sampled memory volume (eq. 2.3)".into()
            },
        ),
        (
            "CommC",
            pct(Some(m.CommC)),
            "tasks communicating at the same time, per cluster (eq. 2.4)".into(),
        ),
        (
            "DramR",
            pct(m.DramR),
            if m.DramR.is_some() {
                "sampled accesses served by DRAM (eq. 2.5)".into()
            } else if messages {
                "needs DRAM accesses, which messages do not give (eq. 2.5)".to_string()
            } else {
                "the sampler gives no data source (eq. 2.5)".to_string()
            },
        ),
        (
            "CommLoc",
            format!("{:.4}", m.CommLoc),
            "how concentrated each task's partners are (eq. 2.6-2.7)".into(),
        ),
        (
            "CommDyn",
            m.CommDyn.to_string(),
            format!("changes of the task order between {interval_s} s intervals (eq. 2.8)"),
        ),
    ];
    for (k, v, what) in rows {
        let _ = writeln!(s, "  {k:<8} {v:>10}   {what}");
    }
    let _ = writeln!(s, "class: {} — {}", class_name(a.class), a.advice);
    let pairs = heaviest_pairs(a, 5);
    if !pairs.is_empty() {
        let list: Vec<String> = pairs
            .iter()
            .map(|&(i, j, v)| format!("{}-{} {}", a.threads[i].tid, a.threads[j].tid, bytes(v)))
            .collect();
        let who = if messages { "ranks" } else { "tids" };
        let _ = writeln!(s, "heaviest pairs ({who}): {}", list.join(", "));
    }
    if messages {
        return s;
    }
    let p = &a.pages;
    let node_list = |v: &[u64]| {
        if v.is_empty() {
            return "none".to_string();
        }
        v.iter()
            .enumerate()
            .map(|(n, c)| format!("{n}: {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        s,
        "pages: {} sampled ({} each), {} used from more than one node; first touch per node {}; most used from {}",
        p.pages,
        bytes(p.page_size as f64),
        p.shared_pages,
        node_list(&p.first_touch_per_node),
        node_list(&p.most_used_per_node)
    );
    if p.table_bytes > 0 || p.sharing_table_bytes > 0 {
        let _ = writeln!(
            s,
            "tables: NUMA table {}, sharing table {} ({} block conflicts)",
            bytes(p.table_bytes as f64),
            bytes(p.sharing_table_bytes as f64),
            p.sharing_conflicts
        );
    }
    if p.dropped_samples > 0 {
        let _ = writeln!(
            s,
            "note: {} samples did not fit in the NUMA table (its page limit)",
            p.dropped_samples
        );
    }
    s
}
