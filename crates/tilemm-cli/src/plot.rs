//! `bench --plot`: GFLOPS against problem size, one line per implementation, as SVG and PNG.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use tilemm_lab::measure::bench::Measurement;

/// TrueType fonts tried for the plot's text, in order (Debian's fonts-dejavu-core first).
const FONTS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// Registers a system font for the plot's text, or says what to install. Called before any
/// measurement, so that a missing font costs nothing.
pub fn prepare_font() -> Result<(), String> {
    for path in FONTS {
        if let Ok(bytes) = std::fs::read(path) {
            // plotters keeps fonts for the process's life.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return Ok(());
            }
        }
    }
    Err(format!(
        "--plot needs a TrueType font for its text and found none of {}: install \
         fonts-dejavu-core (Debian, Ubuntu)",
        FONTS.join(", ")
    ))
}

/// Refuses a `--plot` destination whose directory does not exist, before anything is measured.
pub fn check_destination(stem: &Path) -> Result<(), String> {
    let dir = match stem.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if dir.is_dir() {
        Ok(())
    } else {
        Err(format!(
            "--plot {}: directory {} does not exist",
            stem.display(),
            dir.display()
        ))
    }
}

/// The two files `--plot STEM` writes: STEM.svg and STEM.png (`v1.2` gives `v1.2.svg`).
pub fn paths(stem: &Path) -> [PathBuf; 2] {
    [".svg", ".png"].map(|ext| {
        let mut name = stem.as_os_str().to_owned();
        name.push(ext);
        PathBuf::from(name)
    })
}

/// Implementations' series: `auto → rung:…` rows count as one series, `auto`, whatever each
/// size chose.
fn series_name(implementation: &str) -> &str {
    if implementation.starts_with("auto") {
        "auto"
    } else {
        implementation
    }
}

/// Draws `rows` (verified ones only) into `stem`.svg and `stem`.png.
pub fn write(stem: &Path, title: &str, rows: &[Measurement]) -> Result<[PathBuf; 2], String> {
    let mut series: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    let mut order = Vec::new();
    for m in rows.iter().filter(|m| m.verified) {
        let name = series_name(&m.implementation);
        if !series.contains_key(name) {
            order.push(name);
        }
        // x: the cube root of M·K·N, so that square sizes sit at N.
        let size = (m.problem.m() as f64 * m.problem.k() as f64 * m.problem.n() as f64).cbrt();
        series.entry(name).or_default().push((size, m.gflops));
    }
    if series.is_empty() {
        return Err("no verified measurement to plot".into());
    }
    let [svg, png] = paths(stem);
    draw(
        SVGBackend::new(&svg, (1000, 620)).into_drawing_area(),
        title,
        &order,
        &series,
    )
    .map_err(|e| format!("cannot write {}: {e}", svg.display()))?;
    draw(
        BitMapBackend::new(&png, (1000, 620)).into_drawing_area(),
        title,
        &order,
        &series,
    )
    .map_err(|e| format!("cannot write {}: {e}", png.display()))?;
    Ok([svg, png])
}

fn draw<B: DrawingBackend>(
    area: DrawingArea<B, plotters::coord::Shift>,
    title: &str,
    order: &[&str],
    series: &BTreeMap<&str, Vec<(f64, f64)>>,
) -> Result<(), Box<dyn std::error::Error>>
where
    B::ErrorType: 'static,
{
    area.fill(&WHITE)?;
    // The legend gets a column of its own, so that it never hides a line.
    let (plot_area, legend_area) = area.split_horizontally(area.dim_in_pixel().0 * 7 / 10);
    let points = series.values().flatten();
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points {
        x0 = x0.min(x.log2());
        x1 = x1.max(x.log2());
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    // x is log₂ of the size (sizes double), labelled with the size; y is logarithmic, since
    // rungs differ by orders of magnitude.
    let x_range = (x0 - 0.3)..(x1 + 0.3);
    let y_range = (y0.max(1e-3) / 1.5)..(y1 * 1.5);
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(x_range, y_range.log_scale())?;
    chart
        .configure_mesh()
        .x_desc("size (∛(M·K·N))")
        .y_desc("GFLOPS")
        .x_labels(((x1 - x0).round() as usize + 1).max(2))
        .x_label_formatter(&|x| format!("{:.0}", 2f64.powf(*x)))
        .label_style(("sans-serif", 14))
        .draw()?;
    for (i, name) in order.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let mut line: Vec<(f64, f64)> = series[name].iter().map(|&(x, y)| (x.log2(), y)).collect();
        line.sort_by(|a, b| a.0.total_cmp(&b.0));
        let width = if *name == "auto" { 3 } else { 2 };
        chart.draw_series(LineSeries::new(line.clone(), color.stroke_width(width)))?;
        chart.draw_series(line.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
        let y = 40 + 22 * i as i32;
        legend_area.draw(&PathElement::new(
            vec![(8, y), (30, y)],
            color.stroke_width(width),
        ))?;
        legend_area.draw(&Text::new(
            name.to_string(),
            (36, y - 7),
            ("sans-serif", 13),
        ))?;
    }
    area.present()?;
    Ok(())
}
