//! [`LineChart`]: a small self-contained SVG line chart for the report's scale curves (a few
//! series of a few points each; a plotting crate would be most of the harness's dependencies
//! for this).

use std::fmt::Write as _;

/// Line colours, in series order (colour-blind friendly: Okabe-Ito).
const COLOURS: [&str; 8] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#f0e442",
];
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 360.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 48.0;

/// One line: its name and its (x, y) points.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The legend's text.
    pub name: String,
    /// The points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// A line chart: y from zero, x linear or logarithmic (base 2: client and backend counts).
#[derive(Clone, Debug, PartialEq)]
pub struct LineChart {
    /// The title above the plot.
    pub title: String,
    /// The x axis label.
    pub x_label: String,
    /// The y axis label.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// The lines.
    pub series: Vec<Series>,
}

impl LineChart {
    /// The chart as an SVG document; `None` when no series has a point.
    #[must_use]
    pub fn svg(&self) -> Option<String> {
        let points = self.series.iter().flat_map(|s| s.points.iter());
        let xs: Vec<f64> = points.clone().map(|p| self.x(p.0)).collect();
        let (x_min, x_max) = bounds(&xs)?;
        let data_max = points.map(|p| p.1).fold(0.0_f64, f64::max);
        let step = nice_step(data_max);
        // Round ticks, the top one at or above the largest point.
        let steps = (data_max / step).ceil().max(1.0);
        let y_max = step * steps;
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let span = if x_max > x_min { x_max - x_min } else { 1.0 };
        let px = |x: f64| LEFT + (self.x(x) - x_min) / span * plot_w;
        let py = |y: f64| TOP + plot_h - y / y_max * plot_h;

        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">"#
        );
        let _ = writeln!(
            out,
            r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/><text x="{LEFT}" y="20" font-size="13" font-weight="bold">{}</text>"#,
            escape(&self.title)
        );
        // Axes, the y grid (5 steps) and the x ticks at every distinct x of the data.
        let _ = writeln!(
            out,
            r##"<path d="M{LEFT},{TOP} V{} H{}" fill="none" stroke="#333"/>"##,
            TOP + plot_h,
            LEFT + plot_w
        );
        for tick in 0..=(steps as u32) {
            let y = step * f64::from(tick);
            let _ = writeln!(
                out,
                r##"<line x1="{LEFT}" x2="{}" y1="{y1:.1}" y2="{y1:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + plot_w,
                LEFT - 6.0,
                py(y) + 4.0,
                number(y),
                y1 = py(y),
            );
        }
        for x in self.xs() {
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
                px(x),
                TOP + plot_h + 16.0,
                number(x)
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text><text transform="translate(16,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            LEFT + plot_w / 2.0,
            HEIGHT - 10.0,
            escape(&self.x_label),
            TOP + plot_h / 2.0,
            escape(&self.y_label)
        );
        for (index, series) in self.series.iter().enumerate() {
            let colour = COLOURS[index % COLOURS.len()];
            let path: Vec<String> = series
                .points
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            let _ = writeln!(
                out,
                r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
                path.join(" ")
            );
            for &(x, y) in &series.points {
                let _ = writeln!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"/>"#,
                    px(x),
                    py(y)
                );
            }
            let legend_y = TOP + 14.0 * index as f64;
            let _ = writeln!(
                out,
                r#"<line x1="{}" x2="{}" y1="{legend_y}" y2="{legend_y}" stroke="{colour}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
                WIDTH - RIGHT + 12.0,
                WIDTH - RIGHT + 30.0,
                WIDTH - RIGHT + 34.0,
                legend_y + 4.0,
                escape(&series.name)
            );
        }
        out.push_str("</svg>\n");
        Some(out)
    }

    /// Every distinct x of the series, ascending: the x ticks, and the rows of a table of the
    /// chart's points.
    #[must_use]
    pub fn xs(&self) -> Vec<f64> {
        let mut xs: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        xs
    }

    fn x(&self, x: f64) -> f64 {
        if self.log_x {
            x.max(f64::MIN_POSITIVE).log2()
        } else {
            x
        }
    }
}

/// A round step (1, 2 or 5 times a power of ten) that divides `0..=max` into at most 5 parts.
fn nice_step(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / 5.0;
    let magnitude = 10_f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

fn bounds(values: &[f64]) -> Option<(f64, f64)> {
    let min = values.iter().copied().reduce(f64::min)?;
    let max = values.iter().copied().reduce(f64::max)?;
    Some((min, max))
}

/// A tick label: whole numbers as they are, ten thousands and more as `12k`, small fractions
/// with two decimals.
fn number(value: f64) -> String {
    if value >= 10_000.0 {
        format!("{:.0}k", value / 1_000.0)
    } else if value >= 10.0 || value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(series: Vec<Series>) -> LineChart {
        LineChart {
            title: "tools/call <throughput>".into(),
            x_label: "clients".into(),
            y_label: "calls/s".into(),
            log_x: true,
            series,
        }
    }

    #[test]
    fn a_chart_draws_each_series_with_its_points_and_legend() {
        let svg = chart(vec![
            Series {
                name: "ours".into(),
                points: vec![(1.0, 4_000.0), (4.0, 12_000.0), (16.0, 20_000.0)],
            },
            Series {
                name: "haproxy".into(),
                points: vec![(1.0, 9_000.0), (16.0, 40_000.0)],
            },
        ])
        .svg()
        .expect("points to draw");
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 5);
        assert!(svg.contains(">ours</text>") && svg.contains(">haproxy</text>"));
        assert!(
            svg.contains("tools/call &lt;throughput&gt;"),
            "titles are escaped"
        );
        // Log x: 1 sits on the y axis, 16 at the right end of the plot area.
        assert!(svg.contains(&format!(r#"cx="{LEFT:.1}""#)));
        assert!(svg.contains(&format!(r#"cx="{:.1}""#, WIDTH - RIGHT)));
        assert!(svg.contains(">16</text>") && svg.contains(">4</text>"));
    }

    #[test]
    fn nothing_to_draw_is_no_chart() {
        assert_eq!(chart(Vec::new()).svg(), None);
        let empty = Series {
            name: "none".into(),
            points: Vec::new(),
        };
        assert_eq!(chart(vec![empty]).svg(), None);
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(number(0.0), "0");
        assert_eq!(number(0.25), "0.25");
        assert_eq!(number(256.0), "256");
        assert_eq!(number(4.0), "4");
        assert_eq!(nice_step(133_000.0), 50_000.0);
        assert_eq!(nice_step(27_558.0), 10_000.0);
        assert_eq!(nice_step(3.0), 1.0);
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(number(45_000.0), "45k");
    }
}
