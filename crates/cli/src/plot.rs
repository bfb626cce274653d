//! `bench --plot FILE`: an SVG of decode tokens/s against the VRAM budget, with the PCIe limit
//! (measured link bandwidth ÷ bytes streamed per token) as a second line. The y axis turns
//! logarithmic when the values span more than a factor of 20 (resident speed beside streaming).

use std::fmt::Write;

/// One budget of a sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Budget as a percent of the weight bytes.
    pub budget_percent: f64,
    pub tokens_per_s: f64,
    /// `None` when nothing streams (no limit).
    pub pcie_limit_tok_s: Option<f64>,
}

const W: f64 = 640.0;
const H: f64 = 400.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;

/// A "nice" upper bound for an axis.
fn nice_ceiling(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let magnitude = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&c| c >= v)
        .unwrap_or(10.0 * magnitude)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// How values map to the plot's height: linear from 0, or logarithmic over whole decades.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scale {
    Linear { max: f64 },
    Log { low: f64, high: f64 },
}

impl Scale {
    fn for_values(values: &[f64]) -> Scale {
        let positive: Vec<f64> = values
            .iter()
            .copied()
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect();
        let max = positive.iter().copied().fold(0.0, f64::max);
        let min = positive.iter().copied().fold(f64::INFINITY, f64::min);
        if max > 0.0 && max / min > 20.0 {
            Scale::Log {
                low: min.log10().floor(),
                high: max.log10().ceil(),
            }
        } else {
            Scale::Linear {
                max: nice_ceiling(max),
            }
        }
    }

    /// Share of the height, 0 at the bottom.
    fn share(self, v: f64) -> f64 {
        match self {
            Scale::Linear { max } => (v / max).clamp(0.0, 1.0),
            Scale::Log { low, high } => {
                ((v.max(1e-300).log10() - low) / (high - low).max(1.0)).clamp(0.0, 1.0)
            }
        }
    }

    /// The tick values.
    fn ticks(self) -> Vec<f64> {
        match self {
            Scale::Linear { max } => (0..=4).map(|i| max * f64::from(i) / 4.0).collect(),
            Scale::Log { low, high } => (low as i32..=high as i32).map(|e| 10f64.powi(e)).collect(),
        }
    }
}

/// The SVG document for `points` (any order), titled `title`.
pub fn svg(title: &str, points: &[Point]) -> String {
    let mut pts = points.to_vec();
    pts.sort_by(|a, b| a.budget_percent.total_cmp(&b.budget_percent));
    let values: Vec<f64> = pts
        .iter()
        .flat_map(|p| [Some(p.tokens_per_s), p.pcie_limit_tok_s])
        .flatten()
        .collect();
    let scale = Scale::for_values(&values);
    let x = |percent: f64| LEFT + (W - LEFT - RIGHT) * percent / 100.0;
    let y = |v: f64| H - BOTTOM - (H - TOP - BOTTOM) * scale.share(v);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        W / 2.0,
        escape(title)
    );
    // Axes, ticks and grid.
    let (x0, y0) = (LEFT, H - BOTTOM);
    let _ = writeln!(
        s,
        r#"<path d="M{x0},{TOP} V{y0} H{}" stroke="black" fill="none"/>"#,
        W - RIGHT
    );
    for v in scale.ticks() {
        let yy = y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{x0}" y1="{yy}" x2="{}" y2="{yy}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{v:.1}</text>"##,
            W - RIGHT,
            x0 - 6.0,
            yy + 4.0
        );
    }
    for percent in [0.0, 25.0, 50.0, 75.0, 100.0] {
        let xx = x(percent);
        let _ = writeln!(
            s,
            r#"<text x="{xx}" y="{}" text-anchor="middle">{percent:.0}%</text>"#,
            y0 + 18.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">VRAM budget (% of weight bytes)</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        H - 10.0
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">decode tokens/s{}</text>"#,
        (TOP + y0) / 2.0,
        (TOP + y0) / 2.0,
        if matches!(scale, Scale::Log { .. }) {
            " (log scale)"
        } else {
            ""
        }
    );
    // The two series.
    let line = |values: Vec<(f64, f64)>, color: &str, dash: &str| -> String {
        let mut path = String::new();
        for (i, (px, py)) in values.iter().enumerate() {
            let _ = write!(
                path,
                "{}{:.1},{:.1} ",
                if i == 0 { "M" } else { "L" },
                px,
                py
            );
        }
        let mut out = format!(
            r#"<path d="{}" stroke="{color}" stroke-width="2" fill="none" stroke-dasharray="{dash}"/>"#,
            path.trim_end()
        );
        for (px, py) in values {
            let _ = write!(
                out,
                r#"<circle cx="{px:.1}" cy="{py:.1}" r="3" fill="{color}"/>"#
            );
        }
        out
    };
    let measured: Vec<(f64, f64)> = pts
        .iter()
        .filter(|p| p.tokens_per_s.is_finite())
        .map(|p| (x(p.budget_percent), y(p.tokens_per_s)))
        .collect();
    let limit: Vec<(f64, f64)> = pts
        .iter()
        .filter_map(|p| {
            p.pcie_limit_tok_s
                .filter(|v| v.is_finite())
                .map(|v| (x(p.budget_percent), y(v)))
        })
        .collect();
    let _ = writeln!(s, "{}", line(limit, "#c0392b", "6,4"));
    let _ = writeln!(s, "{}", line(measured, "#1f5fa8", "none"));
    // Legend.
    let lx = LEFT + 12.0;
    let _ = writeln!(
        s,
        r##"<line x1="{lx}" y1="{}" x2="{}" y2="{}" stroke="#1f5fa8" stroke-width="2"/><text x="{}" y="{}">genai-bridge decode tokens/s</text>"##,
        TOP + 10.0,
        lx + 24.0,
        TOP + 10.0,
        lx + 30.0,
        TOP + 14.0
    );
    let _ = writeln!(
        s,
        r##"<line x1="{lx}" y1="{}" x2="{}" y2="{}" stroke="#c0392b" stroke-width="2" stroke-dasharray="6,4"/><text x="{}" y="{}">PCIe limit (measured H2D / streamed bytes per token)</text>"##,
        TOP + 28.0,
        lx + 24.0,
        TOP + 28.0,
        lx + 30.0,
        TOP + 32.0
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plot_has_both_series_and_scales_to_the_largest_value() {
        let points = [
            Point {
                budget_percent: 100.0,
                tokens_per_s: 190.0,
                pcie_limit_tok_s: None,
            },
            Point {
                budget_percent: 10.0,
                tokens_per_s: 3.5,
                pcie_limit_tok_s: Some(3.9),
            },
            Point {
                budget_percent: 50.0,
                tokens_per_s: 6.8,
                pcie_limit_tok_s: Some(7.1),
            },
        ];
        let svg = svg("llama <8B> fp16", &points);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("llama &lt;8B&gt; fp16"));
        // Three measured points, two limit points.
        assert_eq!(svg.matches("<circle").count(), 5);
        // 3.5 to 190 spans more than 20x: decades 1, 10, 100, 1000 on a log axis.
        assert!(svg.contains("(log scale)"), "{svg}");
        assert!(
            svg.contains(">1000.0</text>") && svg.contains(">1.0</text>"),
            "{svg}"
        );
        // Close values keep a linear axis up to a nice ceiling.
        let close = [
            Point {
                budget_percent: 50.0,
                tokens_per_s: 6.8,
                pcie_limit_tok_s: Some(7.1),
            },
            Point {
                budget_percent: 25.0,
                tokens_per_s: 4.6,
                pcie_limit_tok_s: Some(4.8),
            },
        ];
        let linear = super::svg("t", &close);
        assert!(
            !linear.contains("log scale") && linear.contains(">10.0</text>"),
            "{linear}"
        );
        assert_eq!(nice_ceiling(190.0), 200.0);
        assert_eq!(nice_ceiling(3.9), 5.0);
        assert_eq!(nice_ceiling(0.0), 1.0);
    }
}
