//! `numaff analyze`'s figures, drawn with plotters on any backend (SVG for the report, PNG beside
//! it): the communication matrix, events over time, page exclusivity, pages per node, coverage.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use numaff_behave::analyze::Analysis;

use super::text::{bytes, duration};

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
pub(super) fn register_font() -> Result<()> {
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

pub(super) const W: u32 = 720;
pub(super) const H: u32 = 480;

pub(super) type Drawn = std::result::Result<(), String>;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// A figure: a name and a function drawing it on any backend.
pub(super) struct Figure {
    pub name: &'static str,
    pub title: &'static str,
    pub draw: fn(&DrawingArea<SVGBackend, Shift>, &Analysis) -> Drawn,
    pub draw_png: fn(&DrawingArea<BitMapBackend, Shift>, &Analysis) -> Drawn,
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

pub(super) fn figures() -> Vec<Figure> {
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
