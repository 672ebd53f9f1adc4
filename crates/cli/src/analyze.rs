//! `numaff analyze TRACE [--html report.html] [--json]`: DeLocProf's analysis of a trace (002 ch. 2)
//! on kMAF's tables (000 §4.3) — the communication matrix, clusters of events in time, the metrics
//! and class — with a self-contained HTML report and each of its figures as SVG and PNG.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use plotters::coord::Shift;
use plotters::prelude::*;

use numaff_behave::analyze::{analyze_file, analyze_messages, Analysis, AnalyzeConfig, CommSource};
use numaff_behave::delocprof::Class;
use numaff_behave::{messages, TraceMeta, TraceReader};

#[derive(Args)]
pub struct AnalyzeArgs {
    /// The trace (Parquet, as `numaff profile` writes, or CSV with a header line), or a CSV of MPI
    /// messages with the header time_ns,sender,receiver,bytes (README "numaff analyze").
    #[arg(value_name = "TRACE")]
    trace: PathBuf,
    /// Write a self-contained HTML report here, and each figure beside it as SVG and PNG
    /// (REPORT-matrix.svg, ...).
    #[arg(long, value_name = "REPORT.html")]
    html: Option<PathBuf>,
    /// Print the analysis as JSON.
    #[arg(long)]
    json: bool,
    /// Interval of CommDyn (changes of the task order between intervals), in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    interval: f64,
}

pub fn run(args: &AnalyzeArgs) -> Result<()> {
    if !(args.interval > 0.0 && args.interval.is_finite()) {
        bail!(
            "--interval takes a positive number of seconds, not {}",
            args.interval
        );
    }
    let cfg = AnalyzeConfig {
        interval_ns: ((args.interval * 1e9) as u64).max(1),
        groups: args.json,
        ..AnalyzeConfig::default()
    };
    // A CSV whose header names a `sender` is a trace of MPI messages (numaff_behave::messages).
    let (meta, a) = if messages::is_message_trace(&args.trace)? {
        let m = messages::read_messages(&args.trace)?;
        (TraceMeta::default(), analyze_messages(&m, &cfg))
    } else {
        let meta = TraceReader::open(&args.trace)?.meta().clone();
        let a = analyze_file(&args.trace, &cfg)?;
        (meta, a)
    };
    if args.json {
        let doc = serde_json::json!({
            "trace": args.trace,
            "command": meta.command,
            "machine": meta.machine,
            "threads": a.threads,
            "nodes": a.nodes,
            "comm_source": a.comm_source,
            "communication_matrix": a.communication_matrix,
            "events": a.events,
            "clusters": a.clustering.k,
            "cluster_means_ns": a.clustering.means,
            "groups": a.groups,
            "metrics": a.metrics,
            "class": a.class,
            "advice": a.advice,
            "pages": a.pages,
            "coverage": a.coverage,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", render_text(&args.trace, &a, args.interval));
    }
    if let Some(html) = &args.html {
        let written = write_report(html, &args.trace, &meta, &a)?;
        let msg = format!(
            "numaff: wrote {} and {} figure files beside it",
            html.display(),
            written
        );
        if args.json {
            eprintln!("{msg}");
        } else {
            println!("{msg}");
        }
    }
    Ok(())
}

fn bytes(v: f64) -> String {
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

fn duration(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

fn pct(v: Option<f64>) -> String {
    v.map_or("unknown".into(), |v| format!("{:.1} %", v * 100.0))
}

fn class_name(c: Class) -> &'static str {
    match c {
        Class::NonMapping => "Non-mapping",
        Class::Static => "Static",
        Class::Dynamic => "Dynamic",
    }
}

fn source_words(s: CommSource) -> &'static str {
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

fn render_text(trace: &Path, a: &Analysis, interval_s: f64) -> String {
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

// ---------------------------------------------------------------------------------------------
// Figures

/// Fonts tried for the figures' text, in order (`NUMAFF_FONT` first).
const FONTS: [&str; 6] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
];

/// Registers a TrueType font as "sans-serif" for plotters (it draws text with ab_glyph, without
/// fontconfig), once.
fn register_font() -> Result<()> {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let candidates: Vec<PathBuf> = std::env::var_os("NUMAFF_FONT")
            .map(PathBuf::from)
            .into_iter()
            .chain(FONTS.iter().map(PathBuf::from))
            .collect();
        for p in &candidates {
            if let Ok(data) = std::fs::read(p) {
                let data: &'static [u8] = Box::leak(data.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, data).is_ok() {
                    return Ok(());
                }
            }
        }
        Err(
            "no TrueType font for the figures' text: install fonts-dejavu-core, or set \
             NUMAFF_FONT to a .ttf file"
                .to_string(),
        )
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

const W: u32 = 720;
const H: u32 = 480;

type Drawn = std::result::Result<(), String>;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// A figure: a name and a function drawing it on any backend.
struct Figure {
    name: &'static str,
    title: &'static str,
    draw: fn(&DrawingArea<SVGBackend, Shift>, &Analysis) -> Drawn,
    draw_png: fn(&DrawingArea<BitMapBackend, Shift>, &Analysis) -> Drawn,
}

macro_rules! figure {
    ($name:expr, $title:expr, $f:ident) => {
        Figure {
            name: $name,
            title: $title,
            draw: |r, a| $f(r, a),
            draw_png: |r, a| $f(r, a),
        }
    };
}

fn figures() -> Vec<Figure> {
    vec![
        figure!("matrix", "Communication matrix", draw_matrix),
        figure!("events", "Communication events over time", draw_events),
        figure!("exclusivity", "Page exclusivity", draw_exclusivity),
        figure!("pages", "Pages per node", draw_pages),
        figure!("coverage", "Samples per thread", draw_coverage),
    ]
}

fn draw_matrix<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, a: &Analysis) -> Drawn {
    root.fill(&WHITE).map_err(err)?;
    let n = a.communication_matrix.len() as i32;
    let max = a
        .communication_matrix
        .iter()
        .flatten()
        .copied()
        .fold(0.0f64, f64::max);
    let (main, bar) = root.split_horizontally(W - 110);
    let mut chart = ChartBuilder::on(&main)
        .caption(
            format!("Communication matrix (bytes; max {})", bytes(max)),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        // A segmented 0..k has k + 1 cells.
        .build_cartesian_2d(
            (0..n.max(1) - 1).into_segmented(),
            (0..n.max(1) - 1).into_segmented(),
        )
        .map_err(err)?;
    // Labels at the centres of the cells; row 0 at the top (y = n - 1 - row).
    let x_label = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(k) => k.to_string(),
        _ => String::new(),
    };
    let y_label = move |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(k) => (n - 1 - k).to_string(),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("thread (index; tids in the report's table)")
        .y_desc("thread")
        .x_labels(n.clamp(1, 32) as usize)
        .y_labels(n.clamp(1, 32) as usize)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(err)?;
    let m = &a.communication_matrix;
    chart
        .draw_series((0..n).flat_map(|i| {
            (0..n).map(move |j| {
                let v = m[i as usize][j as usize];
                let c = if max > 0.0 {
                    ViridisRGB::get_color((v / max) as f32)
                } else {
                    ViridisRGB::get_color(0.0)
                };
                let y = n - 1 - i;
                Rectangle::new(
                    [
                        (SegmentValue::Exact(j), SegmentValue::Exact(y)),
                        (SegmentValue::Exact(j + 1), SegmentValue::Exact(y + 1)),
                    ],
                    c.filled(),
                )
            })
        }))
        .map_err(err)?;
    // Colour bar.
    let mut cb = ChartBuilder::on(&bar)
        .margin_top(40)
        .margin_bottom(50)
        .margin_right(10)
        .y_label_area_size(60)
        .build_cartesian_2d(0..1, 0.0..max.max(1.0))
        .map_err(err)?;
    cb.configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_labels(5)
        .y_label_formatter(&|v: &f64| bytes(*v))
        .label_style(("sans-serif", 11))
        .draw()
        .map_err(err)?;
    let steps = 64;
    let top = max.max(1.0);
    cb.draw_series((0..steps).map(|k| {
        let lo = top * k as f64 / steps as f64;
        let hi = top * (k + 1) as f64 / steps as f64;
        Rectangle::new(
            [(0, lo), (1, hi)],
            ViridisRGB::get_color(k as f32 / (steps - 1) as f32).filled(),
        )
    }))
    .map_err(err)?;
    root.present().map_err(err)
}

fn draw_events<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, a: &Analysis) -> Drawn {
    root.fill(&WHITE).map_err(err)?;
    let start = a.coverage.start_ns;
    let span_ms = (a.coverage.end_ns.saturating_sub(start) as f64 / 1e6).max(1e-3);
    let width_ms = a.bin_ns as f64 / 1e6;
    let ymax = a
        .event_bins
        .iter()
        .map(|b| b.events)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!(
                "Communication events over time: {} cluster{} (k-means + BIC)",
                a.clustering.k,
                if a.clustering.k == 1 { "" } else { "s" }
            ),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..span_ms + width_ms, 0.0..ymax * 1.1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .bold_line_style(BLACK.mix(0.15))
        .x_desc("time since the first sample (ms)")
        .y_desc(format!("events per {}", duration(a.bin_ns)))
        .y_label_formatter(&|v: &f64| format!("{v:.0}"))
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(err)?;
    for c in 0..a.clustering.k {
        let colour = Palette99::pick(c).to_rgba();
        chart
            .draw_series(a.event_bins.iter().filter(|b| b.cluster == c).map(|b| {
                let x = (b.start_ns - start) as f64 / 1e6;
                Rectangle::new([(x, 0.0), (x + width_ms, b.events as f64)], colour.filled())
            }))
            .map_err(err)?
            .label(format!(
                "cluster {} (mean {:.2} ms)",
                c + 1,
                (a.clustering.means.get(c).copied().unwrap_or(0.0) - start as f64) / 1e6
            ))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    }
    if a.clustering.k > 0 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperMiddle)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(err)?;
    }
    root.present().map_err(err)
}

/// Bars with string labels on the x axis.
fn draw_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    labels: &[String],
    series: &[(&str, Vec<u64>, RGBColor)],
) -> Drawn {
    root.fill(&WHITE).map_err(err)?;
    let n = labels.len().max(1);
    let ymax = series
        .iter()
        .flat_map(|s| s.1.iter())
        .copied()
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(
            0.0..n as f64,
            0.0..ymax * if series.len() > 1 { 1.3 } else { 1.1 },
        )
        .map_err(err)?;
    let labels_c = labels.to_vec();
    let fmt = move |x: &f64| {
        let i = x.floor() as usize;
        if (x - i as f64 - 0.5).abs() < 1e-6 {
            labels_c.get(i).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(WHITE)
        .bold_line_style(BLACK.mix(0.15))
        .x_labels(n * 2 + 1)
        .x_label_formatter(&fmt)
        .y_label_formatter(&|v: &f64| format!("{v:.0}"))
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(err)?;
    let k = series.len().max(1) as f64;
    for (si, (name, values, colour)) in series.iter().enumerate() {
        let colour = *colour;
        chart
            .draw_series(values.iter().enumerate().map(|(i, &v)| {
                let x0 = i as f64 + 0.1 + 0.8 * si as f64 / k;
                Rectangle::new([(x0, 0.0), (x0 + 0.8 / k, v as f64)], colour.filled())
            }))
            .map_err(err)?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    }
    if series.len() > 1 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(err)?;
    }
    root.present().map_err(err)
}

fn draw_exclusivity<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, a: &Analysis) -> Drawn {
    let h = &a.pages.exclusivity_histogram;
    let bins = h.len().max(1);
    let labels: Vec<String> = (0..h.len())
        .map(|i| format!("≤{:.1}", (i + 1) as f64 / bins as f64))
        .collect();
    draw_bars(
        root,
        &format!(
            "Page exclusivity (max/sum of the NUMA vector): {} pages",
            a.pages.pages
        ),
        "exclusivity (1.0: used from one node only)",
        "pages",
        &labels,
        &[("pages", h.clone(), RGBColor(49, 104, 142))],
    )
}

fn draw_pages<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, a: &Analysis) -> Drawn {
    let labels: Vec<String> = (0..a.nodes).map(|n| format!("node {n}")).collect();
    draw_bars(
        root,
        "Pages per node",
        "NUMA node",
        "pages",
        &labels,
        &[
            (
                "first touched from",
                a.pages.first_touch_per_node.clone(),
                RGBColor(49, 104, 142),
            ),
            (
                "most used from",
                a.pages.most_used_per_node.clone(),
                RGBColor(53, 183, 121),
            ),
        ],
    )
}

fn draw_coverage<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, a: &Analysis) -> Drawn {
    let shown = a.threads.len().min(64);
    let labels: Vec<String> = a.threads[..shown]
        .iter()
        .map(|t| t.tid.to_string())
        .collect();
    let values: Vec<u64> = a.threads[..shown].iter().map(|t| t.samples).collect();
    draw_bars(
        root,
        &format!(
            "Samples per thread: {} samples, {:.0} per s{}",
            a.coverage.samples,
            a.coverage.samples_per_s,
            if shown < a.threads.len() {
                format!(" (first {shown} threads)")
            } else {
                String::new()
            }
        ),
        "thread (tid)",
        "samples",
        &labels,
        &[("samples", values, RGBColor(49, 104, 142))],
    )
}

// ---------------------------------------------------------------------------------------------
// The report

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `report.html` → (`report`, directory).
fn stem_of(html: &Path) -> (String, PathBuf) {
    let stem = html
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    let dir = match html.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    (stem, dir)
}

/// Writes the report and its figures; returns how many figure files were written.
fn write_report(
    html: &Path,
    trace: &Path,
    meta: &numaff_behave::TraceMeta,
    a: &Analysis,
) -> Result<usize> {
    register_font()?;
    let (stem, dir) = stem_of(html);
    let mut svgs = Vec::new();
    let mut files = 0;
    for f in figures() {
        // A message trace has no pages.
        if a.comm_source == CommSource::Messages && matches!(f.name, "exclusivity" | "pages") {
            continue;
        }
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
            (f.draw)(&root, a).map_err(|e| anyhow!("cannot draw the {} figure: {e}", f.name))?;
        }
        let svg_path = dir.join(format!("{stem}-{}.svg", f.name));
        numaff_machine::write_atomic(&svg_path, svg.as_bytes())?;
        // PNG: drawn to a temporary file (the extension names the format), renamed into place.
        let png_path = dir.join(format!("{stem}-{}.png", f.name));
        let tmp = dir.join(format!(".{stem}-{}.tmp.{}.png", f.name, std::process::id()));
        let drawn = {
            let root = BitMapBackend::new(&tmp, (W, H)).into_drawing_area();
            (f.draw_png)(&root, a)
        };
        if let Err(e) = drawn.map_err(|e| anyhow!("cannot draw the {} figure as PNG: {e}", f.name))
        {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        std::fs::rename(&tmp, &png_path)
            .with_context(|| format!("cannot write {}", png_path.display()))?;
        files += 2;
        svgs.push((f.name, f.title, svg));
    }
    let doc = report_html(trace, meta, a, &stem, &svgs);
    numaff_machine::write_atomic(html, doc.as_bytes())?;
    Ok(files)
}

fn report_html(
    trace: &Path,
    meta: &numaff_behave::TraceMeta,
    a: &Analysis,
    stem: &str,
    svgs: &[(&str, &str, String)],
) -> String {
    let m = &a.metrics;
    let c = &a.coverage;
    let mut h = String::new();
    let title = format!("numaff analyze: {}", trace.display());
    let _ = write!(
        h,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1500px; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1em; }}
td, th {{ border: 1px solid #ccc; padding: 3px 8px; text-align: left; }}
td.n {{ text-align: right; font-variant-numeric: tabular-nums; }}
.class {{ font-size: 1.2em; padding: 0.5em 1em; background: #eef5ee; border-left: 4px solid #3a3; }}
.figs {{ display: flex; flex-wrap: wrap; gap: 1em; }}
figure {{ margin: 0; border: 1px solid #ddd; padding: 0.5em; flex: 1 1 560px; max-width: 720px; }}
figure svg {{ max-width: 100%; height: auto; }}
figcaption {{ font-size: 0.9em; color: #555; }}
</style></head><body>
<h1>{}</h1>
"#,
        esc(&title),
        esc(&title)
    );
    let _ = writeln!(
        h,
        r#"<p class="class" id="class">Class: <b>{}</b> — {}</p>"#,
        class_name(a.class),
        esc(&a.advice)
    );
    let _ = writeln!(
        h,
        "<h2>Metrics (DeLocProf, 002 §2.3.4-2.3.5)</h2><table id=\"metrics\">"
    );
    let rows = [
        (
            "Lcomm",
            bytes(m.Lcomm),
            "bytes exchanged between threads, sampled",
        ),
        (
            "CommR",
            pct(m.CommR),
            "communication over sampled memory volume",
        ),
        (
            "CommC",
            pct(Some(m.CommC)),
            "threads communicating at the same time",
        ),
        ("DramR", pct(m.DramR), "sampled accesses served by DRAM"),
        (
            "CommLoc",
            format!("{:.4}", m.CommLoc),
            "concentration of each thread's partners",
        ),
        (
            "CommDyn",
            m.CommDyn.to_string(),
            "changes of the thread order between intervals",
        ),
    ];
    for (k, v, what) in rows {
        let _ = writeln!(
            h,
            "<tr><th>{k}</th><td class=\"n\">{}</td><td>{what}</td></tr>",
            esc(&v)
        );
    }
    let _ = writeln!(h, "</table>");
    let _ = writeln!(
        h,
        "<p>{} communication events from {}; {} cluster(s) in time.</p>",
        a.events,
        esc(source_words(a.comm_source)),
        a.clustering.k
    );
    let _ = writeln!(h, "<h2>Figures</h2><div class=\"figs\">");
    for (name, title, svg) in svgs {
        let _ = writeln!(
            h,
            "<figure id=\"fig-{name}\">{svg}<figcaption>{} — also <a href=\"{s}-{name}.svg\">SVG</a>, <a href=\"{s}-{name}.png\">PNG</a></figcaption></figure>",
            esc(title),
            s = esc(stem)
        );
    }
    let _ = writeln!(h, "</div>");
    let _ = writeln!(h, "<h2>Threads</h2><table id=\"threads\"><tr><th>index</th><th>pid</th><th>tid</th><th>name</th><th>samples</th></tr>");
    for t in &a.threads {
        let _ = writeln!(
            h,
            "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td></tr>",
            t.index,
            t.pid,
            t.tid,
            esc(t.name.as_deref().unwrap_or("")),
            t.samples
        );
    }
    let _ = writeln!(h, "</table>");
    let _ = writeln!(h, "<h2>Sampler coverage</h2><table id=\"coverage\">");
    let mut cov: Vec<(String, String)> = vec![
        (
            "sampler".into(),
            c.sampler.clone().unwrap_or_else(|| "not recorded".into()),
        ),
        ("command".into(), meta.command.clone().unwrap_or_default()),
        (
            "samples".into(),
            format!(
                "{} ({} faults, {} loads, {} stores)",
                c.samples, c.faults, c.loads, c.stores
            ),
        ),
        ("span".into(), duration(c.end_ns.saturating_sub(c.start_ns))),
        (
            "samples per second".into(),
            format!("{:.0}", c.samples_per_s),
        ),
        ("with latency".into(), c.with_latency.to_string()),
        ("with data source".into(), c.with_data_source.to_string()),
        (
            "samples per node".into(),
            c.samples_per_node
                .iter()
                .enumerate()
                .map(|(n, v)| format!("{n}: {v}"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        (
            "pages".into(),
            format!(
                "{} of {}, {} used from more than one node; NUMA table {}, sharing table {}{}",
                a.pages.pages,
                bytes(a.pages.page_size as f64),
                a.pages.shared_pages,
                bytes(a.pages.table_bytes as f64),
                bytes(a.pages.sharing_table_bytes as f64),
                if a.pages.dropped_samples > 0 {
                    format!(", {} samples did not fit", a.pages.dropped_samples)
                } else {
                    String::new()
                }
            ),
        ),
    ];
    for (k, v) in &c.rates {
        cov.push((format!("rate: {k}"), format!("{v}")));
    }
    if let Some(machine) = &meta.machine {
        let first = machine.lines().next().unwrap_or("");
        cov.push(("machine".into(), first.to_string()));
    }
    for (k, v) in cov {
        let _ = writeln!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(&k), esc(&v));
    }
    let _ = writeln!(h, "</table>");
    let _ = writeln!(
        h,
        "<p><small>numaff {} — the report is self-contained: figures are inline SVG.</small></p>\n</body></html>",
        env!("CARGO_PKG_VERSION")
    );
    h
}
