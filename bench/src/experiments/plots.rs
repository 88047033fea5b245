//! SVG line charts with plotters: one line per series through the medians, a dot per point and
//! a vertical whisker from the minimum to the maximum, so the noise is visible next to the
//! trend.
//!
//! Only plotters' SVG backend is built (no bitmap or font rendering); text is laid out with
//! plotters' built-in font metrics and drawn by the SVG viewer. The x axis is either numeric
//! (core counts) or a list of categories at equal spacing (readahead windows, whose values
//! span 0 to thousands, where a log scale cannot show 0). It knows nothing of any experiment;
//! each one builds its own charts (`scale/charts.rs` for `bench scale` and `bench sweep`).

use std::path::Path;

use plotters::prelude::*;

use super::{ExperimentError, Result};

/// One point of a series: the median at `x`, with its minimum and maximum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// The x coordinate (a value, or a category's index).
    pub x: i32,
    /// The median.
    pub median: f64,
    /// The smallest measurement.
    pub min: f64,
    /// The largest measurement.
    pub max: f64,
}

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend entry.
    pub label: String,
    /// Its points, in x order.
    pub points: Vec<Point>,
}

/// How the x axis is labelled.
#[derive(Debug, Clone, PartialEq)]
pub enum XAxis {
    /// x values are numbers; those in `marked` get a `*` (explained in the chart's note).
    Numeric {
        /// Values to mark, e.g. oversubscribed core counts.
        marked: Vec<i32>,
    },
    /// x values are indexes into these labels, drawn at equal spacing.
    Categories(Vec<String>),
}

/// A line chart.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    /// The caption.
    pub title: String,
    /// The x axis description.
    pub x_desc: String,
    /// The y axis description.
    pub y_desc: String,
    /// How x is labelled.
    pub x_axis: XAxis,
    /// The lines.
    pub series: Vec<Series>,
    /// A footnote drawn under the caption (e.g. what `*` means), if any.
    pub note: Option<String>,
}

impl LineChart {
    /// Draws the chart as an SVG file at `path`.
    pub fn draw_svg(&self, path: &Path) -> Result<()> {
        let fail = |e: &dyn std::fmt::Display| ExperimentError::output(path, format!("plot: {e}"));
        let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let root = match &self.note {
            Some(note) => {
                let (top, rest) = root.split_vertically(28);
                top.draw(&Text::new(
                    note.clone(),
                    (12, 8),
                    ("sans-serif", 14).into_font().color(&BLACK.mix(0.7)),
                ))
                .map_err(|e| fail(&e))?;
                rest
            }
            None => root,
        };

        let xs: Vec<i32> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.x))
            .collect();
        let (x_lo, x_hi) = match &self.x_axis {
            XAxis::Categories(labels) => (-1, labels.len().max(1) as i32),
            XAxis::Numeric { .. } => (
                xs.iter().copied().min().unwrap_or(0).min(0),
                xs.iter().copied().max().unwrap_or(1) + 1,
            ),
        };
        let y_top = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.max.max(p.median)))
            .filter(|y| y.is_finite())
            .fold(0.0f64, f64::max);
        let y_top = if y_top > 0.0 { y_top * 1.12 } else { 1.0 };

        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(x_lo..x_hi, 0.0..y_top)
            .map_err(|e| fail(&e))?;
        let x_label = |x: &i32| -> String {
            match &self.x_axis {
                XAxis::Categories(labels) => usize::try_from(*x)
                    .ok()
                    .and_then(|i| labels.get(i).cloned())
                    .unwrap_or_default(),
                XAxis::Numeric { marked } if xs.contains(x) => {
                    format!("{x}{}", if marked.contains(x) { "*" } else { "" })
                }
                XAxis::Numeric { .. } => String::new(),
            }
        };
        let span = (x_hi - x_lo + 1).clamp(2, 40) as usize;
        chart
            .configure_mesh()
            .x_desc(&self.x_desc)
            .y_desc(&self.y_desc)
            .x_labels(span)
            .x_label_formatter(&x_label)
            .y_label_formatter(&|y: &f64| format_tick(*y))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| fail(&e))?;

        for (i, s) in self.series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().map(|p| (p.x, p.median)),
                    color.stroke_width(2),
                ))
                .map_err(|e| fail(&e))?
                .label(s.label.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(
                    s.points
                        .iter()
                        .map(|p| Circle::new((p.x, p.median), 4, color.filled())),
                )
                .map_err(|e| fail(&e))?;
            chart
                .draw_series(s.points.iter().filter(|p| p.max > p.min).map(|p| {
                    PathElement::new(vec![(p.x, p.min), (p.x, p.max)], color.stroke_width(1))
                }))
                .map_err(|e| fail(&e))?;
        }
        if !self.series.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .label_font(("sans-serif", 13))
                .draw()
                .map_err(|e| fail(&e))?;
        }
        root.present().map_err(|e| fail(&e))?;
        Ok(())
    }
}

/// A y tick: few digits, no trailing zeros.
fn format_tick(y: f64) -> String {
    let a = y.abs();
    let s = if a == 0.0 || a >= 100.0 {
        format!("{y:.0}")
    } else if a >= 10.0 {
        format!("{y:.1}")
    } else if a >= 1.0 {
        format!("{y:.2}")
    } else {
        format!("{y:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks() {
        assert_eq!(format_tick(0.0), "0");
        assert_eq!(format_tick(0.25), "0.25");
        assert_eq!(format_tick(1.5), "1.5");
        assert_eq!(format_tick(12.0), "12");
        assert_eq!(format_tick(250.0), "250");
    }

    #[test]
    fn draws_an_svg() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.svg");
        let chart = LineChart {
            title: "t & <test>".into(),
            x_desc: "cores".into(),
            y_desc: "GB/s".into(),
            x_axis: XAxis::Numeric { marked: vec![3] },
            series: vec![Series {
                label: "dma".into(),
                points: vec![
                    Point {
                        x: 1,
                        median: 1.0,
                        min: 0.9,
                        max: 1.1,
                    },
                    Point {
                        x: 3,
                        median: 1.5,
                        min: 1.5,
                        max: 1.5,
                    },
                ],
            }],
            note: Some("* oversubscribed".into()),
        };
        chart.draw_svg(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("<svg") && svg.contains("</svg>"), "{svg}");
    }
}
