//! The scaling bench's figure: hand-rolled SVG, one panel per measure, a log₂ x axis, one
//! line per library or kind.

use std::fmt::Write as _;

/// One line of a panel: its label and (x, y) points.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// One panel: a title, the x axis' name, and its lines.
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub series: Vec<Series>,
}

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#7f7f7f", "#ff7f0e",
];
const W: f64 = 400.0;
const H: f64 = 300.0;
const LEFT: f64 = 60.0;
const TOP: f64 = 30.0;
const PLOT_W: f64 = 320.0;
const PLOT_H: f64 = 200.0;

/// The panels side by side, with one legend below them.
pub fn svg(panels: &[Panel]) -> String {
    let legend: Vec<&str> = panels
        .iter()
        .flat_map(|p| p.series.iter().map(|s| s.label.as_str()))
        .fold(Vec::new(), |mut seen, l| {
            if !seen.contains(&l) {
                seen.push(l);
            }
            seen
        });
    let width = W * panels.len() as f64;
    let height = H + 20.0 * legend.len() as f64;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    for (i, panel) in panels.iter().enumerate() {
        draw_panel(&mut out, panel, W * i as f64, &legend);
    }
    for (i, label) in legend.iter().enumerate() {
        let y = H + 20.0 * i as f64;
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(
            out,
            "<line x1=\"{LEFT}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{color}\" stroke-width=\"2\"/>\
             <text x=\"{}\" y=\"{}\">{}</text>",
            LEFT + 24.0,
            LEFT + 30.0,
            y + 4.0,
            escape(label)
        );
    }
    out.push_str("</svg>\n");
    out
}

fn draw_panel(out: &mut String, panel: &Panel, x0: f64, legend: &[&str]) {
    let all = || panel.series.iter().flat_map(|s| s.points.iter());
    let (min_x, max_x) = all().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let max_y = all().fold(0.0f64, |m, p| m.max(p.1)) * 1.1;
    if !(min_x.is_finite() && max_y > 0.0) {
        return;
    }
    let (lx0, lx1) = (min_x.log2(), max_x.log2().max(min_x.log2() + 1.0));
    let sx = |x: f64| x0 + LEFT + (x.log2() - lx0) / (lx1 - lx0) * PLOT_W;
    let sy = |y: f64| TOP + PLOT_H - y / max_y * PLOT_H;
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"18\" font-weight=\"bold\">{}</text>\n\
         <rect x=\"{}\" y=\"{TOP}\" width=\"{PLOT_W}\" height=\"{PLOT_H}\" fill=\"none\" stroke=\"#999\"/>\n\
         <text x=\"{}\" y=\"{}\">{}</text>",
        x0 + LEFT,
        escape(&panel.title),
        x0 + LEFT,
        x0 + LEFT + PLOT_W / 2.0 - 40.0,
        TOP + PLOT_H + 32.0,
        escape(&panel.x_label),
    );
    // x ticks at the measured points, y ticks at fifths of the range.
    let mut xs: Vec<f64> = all().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    for x in xs {
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            sx(x),
            TOP + PLOT_H + 14.0,
            x
        );
    }
    for i in 0..=5 {
        let y = max_y * f64::from(i) / 5.0;
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#eee\"/>",
            x0 + LEFT - 4.0,
            sy(y) + 4.0,
            short(y),
            x0 + LEFT,
            sy(y),
            x0 + LEFT + PLOT_W,
            sy(y)
        );
    }
    for series in &panel.series {
        let index = legend.iter().position(|l| *l == series.label).unwrap_or(0);
        let color = COLORS[index % COLORS.len()];
        let points: Vec<String> = series
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        let _ = writeln!(
            out,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
            points.join(" ")
        );
        for &(x, y) in &series.points {
            let _ = writeln!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"/>",
                sx(x),
                sy(y)
            );
        }
    }
}

fn short(y: f64) -> String {
    if y >= 10_000.0 {
        format!("{:.0}k", y / 1000.0)
    } else if y >= 100.0 {
        format!("{y:.0}")
    } else {
        format!("{y:.1}")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
