//! `numaff analyze --html`: a self-contained HTML report with the figures inlined as SVG, each
//! figure also written beside it as SVG and PNG.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;

use numaff_behave::analyze::{Analysis, CommSource};

use super::figures::{figures, register_font, H, W};
use super::text::{bytes, class_name, duration, pct, source_words};

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

/// The files `--html` writes: the report, then each figure as SVG and PNG beside it.
pub(super) fn output_paths(html: &Path) -> Vec<PathBuf> {
    let (stem, dir) = stem_of(html);
    let mut v = vec![html.to_path_buf()];
    for f in figures() {
        for ext in ["svg", "png"] {
            v.push(dir.join(format!("{stem}-{}.{ext}", f.name)));
        }
    }
    v
}

/// Writes the report and its figures; returns how many figure files were written.
pub(super) fn write_report(
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
        crate::output::write(&crate::output::check(&svg_path)?, svg.as_bytes())?;
        // PNG: drawn to a file whose extension names the format, put in place whole.
        let png_path = dir.join(format!("{stem}-{}.png", f.name));
        crate::output::check(&png_path)?
            .write_by_name(".png", |tmp| {
                let root = BitMapBackend::new(tmp, (W, H)).into_drawing_area();
                (f.draw_png)(&root, a)
                    .map_err(|e| anyhow!("cannot draw the {} figure as PNG: {e}", f.name))
            })
            .with_context(|| format!("cannot write {}", png_path.display()))?;
        files += 2;
        svgs.push((f.name, f.title, svg));
    }
    let doc = report_html(trace, meta, a, &stem, &svgs);
    crate::output::write(&crate::output::check(html)?, doc.as_bytes())?;
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
