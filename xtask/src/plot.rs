//! Minimal SVG line charts (log or linear axes) for benchmark results: no plotting dependency,
//! readable in any browser or image viewer.

use std::fmt::Write as _;

/// One line of a chart.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// `(x, y)` points, in x order.
    pub points: Vec<(f64, f64)>,
    /// Dashed line.
    pub dashed: bool,
}

/// A chart.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub log_x: bool,
    pub log_y: bool,
    pub series: Vec<Series>,
    /// Vertical lines at these x values with their labels (events such as faults).
    pub markers: Vec<(f64, String)>,
}

const W: f64 = 720.0;
const H: f64 = 440.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

fn scale(v: f64, log: bool) -> f64 {
    if log { v.max(1e-9).log10() } else { v }
}

/// Tick values covering `[lo, hi]` (data units).
fn ticks(lo: f64, hi: f64, log: bool) -> Vec<f64> {
    if log {
        let (a, b) = (
            lo.max(1e-9).log10().floor() as i32,
            hi.max(1e-9).log10().ceil() as i32,
        );
        (a..=b).map(|e| 10f64.powi(e)).collect()
    } else {
        let span = (hi - lo).max(1e-9);
        let step = 10f64.powf((span / 5.0).log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * step)
            .find(|s| span / s <= 6.0)
            .unwrap_or(step * 10.0);
        let mut t = (lo / step).floor() * step;
        let mut out = Vec::new();
        while t <= hi + step * 0.5 {
            out.push(t);
            t += step;
        }
        out
    }
}

fn label(v: f64) -> String {
    if v >= 1000.0 || (v != 0.0 && v < 0.01) {
        format!("{v:.0e}")
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// Renders the chart as an SVG document.
pub fn svg(chart: &Chart<'_>) -> String {
    let points = chart.series.iter().flat_map(|s| s.points.iter());
    let (mut x_lo, mut x_hi, mut y_lo, mut y_hi) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points {
        x_lo = x_lo.min(x);
        x_hi = x_hi.max(x);
        y_lo = y_lo.min(y);
        y_hi = y_hi.max(y);
    }
    for &(x, _) in &chart.markers {
        x_lo = x_lo.min(x);
        x_hi = x_hi.max(x);
    }
    if x_lo > x_hi {
        (x_lo, x_hi, y_lo, y_hi) = (1.0, 10.0, 1.0, 10.0);
    }
    if !chart.log_y {
        y_lo = y_lo.min(0.0);
    }
    let xt = ticks(x_lo, x_hi, chart.log_x);
    let yt = ticks(y_lo, y_hi, chart.log_y);
    let (xa, xb) = (
        scale(xt[0], chart.log_x),
        scale(xt[xt.len() - 1], chart.log_x),
    );
    let (ya, yb) = (
        scale(yt[0], chart.log_y),
        scale(yt[yt.len() - 1], chart.log_y),
    );
    let px =
        |x: f64| LEFT + (scale(x, chart.log_x) - xa) / (xb - xa).max(1e-9) * (W - LEFT - RIGHT);
    let py = |y: f64| {
        H - BOTTOM - (scale(y, chart.log_y) - ya) / (yb - ya).max(1e-9) * (H - TOP - BOTTOM)
    };
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        escape(chart.title)
    );
    for &t in &xt {
        let x = px(t);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            H - BOTTOM,
            H - BOTTOM + 16.0,
            label(t)
        );
    }
    for &t in &yt {
        let y = py(t);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            label(t)
        );
    }
    let _ = write!(
        out,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#333"/><text x="{}" y="{}" text-anchor="middle">{}</text><text transform="translate(18,{}) rotate(-90)" text-anchor="middle">{}</text>"##,
        W - LEFT - RIGHT,
        H - TOP - BOTTOM,
        (LEFT + W - RIGHT) / 2.0,
        H - 18.0,
        escape(chart.x_label),
        (TOP + H - BOTTOM) / 2.0,
        escape(chart.y_label)
    );
    for (i, (x, text)) in chart.markers.iter().enumerate() {
        let x = px(*x);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{}" stroke="#555" stroke-dasharray="2,3"/><text x="{:.1}" y="{:.1}" font-size="11" fill="#333">{}</text>"##,
            H - BOTTOM,
            x + 4.0,
            TOP + 14.0 + 14.0 * i as f64,
            escape(text)
        );
    }
    // Dots only where there are few points (a timeline would drown in them).
    let dots = chart.series.iter().all(|s| s.points.len() <= 40);
    for (i, s) in chart.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = s
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let dash = if s.dashed {
            r#" stroke-dasharray="6,4""#
        } else {
            ""
        };
        let _ = write!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{dash}/>"#,
            path.join(" ")
        );
        for &(x, y) in s.points.iter().filter(|_| dots) {
            let _ = write!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                px(x),
                py(y)
            );
        }
        let ly = TOP + 16.0 + 20.0 * i as f64;
        let _ = write!(
            out,
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
            W - RIGHT + 12.0,
            W - RIGHT + 36.0,
            W - RIGHT + 42.0,
            ly + 4.0,
            escape(&s.name)
        );
    }
    out.push_str("</svg>\n");
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_series_and_tick() {
        let chart = Chart {
            title: "t <1>",
            x_label: "x",
            y_label: "y",
            log_x: true,
            log_y: true,
            series: vec![
                Series {
                    name: "a".into(),
                    points: vec![(1.0, 10.0), (100.0, 1000.0)],
                    dashed: false,
                },
                Series {
                    name: "b".into(),
                    points: vec![(1.0, 50.0), (100.0, 50.0)],
                    dashed: true,
                },
            ],
            markers: vec![(30.0, "fault <a>".into())],
        };
        let svg = svg(&chart);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("t &lt;1&gt;"));
        assert!(svg.contains("fault &lt;a&gt;"));
        assert!(svg.contains(">100<") && svg.contains(">1000<") || svg.contains(">1e3<"));
        assert_eq!(ticks(3.0, 70.0, false), vec![0.0, 20.0, 40.0, 60.0, 80.0]);
    }
}
