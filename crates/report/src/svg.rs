//! A small SVG writer for the report's charts: x–y charts (lines, points, bars, a second
//! y axis, reference lines) and category charts (stacked bars, box plots with every value
//! drawn beside its box). Each chart is one standalone `<svg>` element with a `<title>` and
//! a `<desc>` for screen readers, its own fonts and colours, and no external reference, so
//! the same text works inline in the page and as a file of its own.

use std::fmt::Write as _;

/// Width and height of every chart, in SVG user units (pixels at 100 %).
pub const WIDTH: f64 = 760.0;
pub const HEIGHT: f64 = 380.0;

const LEFT: f64 = 78.0;
const RIGHT_PLAIN: f64 = 24.0;
const RIGHT_AXIS: f64 = 78.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 84.0;

/// Colours that stay apart for colour-blind readers (Okabe and Ito), darkest first.
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

/// Escapes text for XML and HTML content and for attribute values in double quotes. The
/// backticks of Markdown-ish text (a diagnosis's `sysctl` names) are dropped: a chart or a
/// table cell shows the words, not the marks (`html::rich` turns them into `<code>`).
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '`' => {}
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c => o.push(c),
        }
    }
    o
}

/// A number for a tick label or a tooltip: at most three significant decimals, no
/// trailing zeros.
pub fn short(v: f64) -> String {
    if !v.is_finite() {
        return "-".to_string();
    }
    let a = v.abs();
    let s = if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The unit of an axis name: what its last parentheses hold ("goodput (Gbit/s)" → "Gbit/s").
fn unit_of(axis: &str) -> &str {
    axis.rsplit_once('(')
        .and_then(|(_, u)| u.strip_suffix(')'))
        .unwrap_or("")
}

/// Tick values covering `lo..=hi` at a round step (1, 2 or 5 × 10ⁿ), about `n` of them.
pub fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let (lo, hi) = if lo.is_finite() && hi.is_finite() && hi > lo {
        (lo, hi)
    } else {
        (0.0, 1.0)
    };
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).floor() as i64;
    let last = (hi / step).ceil() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// A linear map from data values to pixels.
#[derive(Debug, Clone, Copy)]
struct Scale {
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Scale {
    fn at(&self, v: f64) -> f64 {
        let span = self.hi - self.lo;
        let t = if span > 0.0 {
            (v - self.lo) / span
        } else {
            0.5
        };
        self.from + t * (self.to - self.from)
    }
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Points joined by a line.
    Line,
    /// Points alone.
    Points,
    /// Thin bars from zero, centred on x.
    Bars,
}

/// One named series of (x, y) values.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub mark: Mark,
    /// Drawn against the second (right) y axis.
    pub right: bool,
    pub color: &'static str,
    pub dashed: bool,
    /// A thin, faint line: a part under the series that matters (a stream under its sum).
    pub thin: bool,
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>, mark: Mark, color: usize) -> Self {
        Series {
            name: name.into(),
            points: points
                .into_iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect(),
            mark,
            right: false,
            color: PALETTE[color % PALETTE.len()],
            dashed: false,
            thin: false,
        }
    }

    pub fn on_right(mut self) -> Self {
        self.right = true;
        self
    }

    pub fn dashed(mut self) -> Self {
        self.dashed = true;
        self
    }

    pub fn thin(mut self) -> Self {
        self.thin = true;
        self
    }
}

/// A labelled line across the plot: a ceiling, a limit, a found value.
#[derive(Debug, Clone)]
pub struct RefLine {
    pub label: String,
    pub value: f64,
    /// A vertical line at x = value; else horizontal at y = value (left axis).
    pub vertical: bool,
    pub color: &'static str,
}

/// A chart of numeric x against one or two y axes.
#[derive(Debug, Clone)]
pub struct XyChart {
    pub title: String,
    pub desc: String,
    pub x_name: String,
    pub y_name: String,
    /// The right axis's name; series with `right` need it.
    pub y2_name: Option<String>,
    pub series: Vec<Series>,
    pub lines: Vec<RefLine>,
    /// Start the y axes at zero (rates, counts).
    pub y_from_zero: bool,
    /// Start the x axis at zero (time since the start).
    pub x_from_zero: bool,
}

fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero {
        lo = lo.min(0.0);
    }
    if hi <= lo {
        hi = lo + if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
    }
    (lo, hi)
}

/// The opening of a chart: root element, title, description, background and title text.
fn open(out: &mut String, title: &str, desc: &str, id: &str) {
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" aria-labelledby="{id}-t {id}-d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12"><title id="{id}-t">{t}</title><desc id="{id}-d">{d}</desc><rect width="100%" height="100%" fill="#ffffff"/><text x="{cx}" y="22" text-anchor="middle" font-size="15" font-weight="bold" fill="#222">{t}</text>"##,
        t = esc(title),
        d = esc(desc),
        cx = WIDTH / 2.0
    );
}

/// Tick labels of a y axis at `x`, and its name turned along it. The left axis has `grid`,
/// the x where its grid lines end; the right axis (None) draws none.
fn y_axis(out: &mut String, s: Scale, ticks_: &[f64], name: &str, x: f64, grid: Option<f64>) {
    for &t in ticks_ {
        let y = s.at(t);
        if let Some(x2) = grid {
            let _ = write!(
                out,
                r##"<line x1="{LEFT}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" stroke="#e3e3e3"/>"##
            );
        }
        let right = grid.is_none();
        let (tx, anchor) = if right {
            (x + 6.0, "start")
        } else {
            (x - 6.0, "end")
        };
        let _ = write!(
            out,
            r##"<text x="{tx}" y="{ty:.1}" text-anchor="{anchor}" fill="#444">{}</text>"##,
            short(t),
            ty = y + 4.0
        );
    }
    let (nx, rot) = if grid.is_none() {
        (x + 62.0, 90)
    } else {
        (x - 60.0, -90)
    };
    let cy = (TOP + HEIGHT - BOTTOM) / 2.0;
    let _ = write!(
        out,
        r##"<text x="{nx}" y="{cy}" text-anchor="middle" transform="rotate({rot} {nx} {cy})" fill="#222">{}</text>"##,
        esc(name)
    );
}

/// The legend: one swatch and name per entry, in rows under the x axis name.
fn legend(out: &mut String, entries: &[(String, &'static str, bool)]) {
    let mut x = LEFT;
    let mut y = HEIGHT - 22.0;
    for (name, color, dashed) in entries {
        let w = 28.0 + 7.0 * name.chars().count() as f64;
        if x + w > WIDTH - 10.0 && x > LEFT {
            x = LEFT;
            y += 16.0;
        }
        let dash = if *dashed {
            r#" stroke-dasharray="5 3""#
        } else {
            ""
        };
        let _ = write!(
            out,
            r##"<g class="legend"><line x1="{x}" x2="{x2}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="3"{dash}/><text x="{tx}" y="{ty}" fill="#222">{}</text></g>"##,
            esc(name),
            x2 = x + 18.0,
            ly = y - 4.0,
            tx = x + 23.0,
            ty = y
        );
        x += w;
    }
}

impl XyChart {
    /// The chart as one `<svg>` element; `id` makes its element ids unique in a page.
    pub fn svg(&self, id: &str) -> String {
        let has_right = self.series.iter().any(|s| s.right) && self.y2_name.is_some();
        let right_edge = WIDTH - if has_right { RIGHT_AXIS } else { RIGHT_PLAIN };
        let bottom = HEIGHT - BOTTOM;
        let xs = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .chain(self.lines.iter().filter(|l| l.vertical).map(|l| l.value));
        let (xlo, xhi) = range(xs, self.x_from_zero);
        let ys = self
            .series
            .iter()
            .filter(|s| !s.right || !has_right)
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(self.lines.iter().filter(|l| !l.vertical).map(|l| l.value));
        let (ylo, yhi) = range(ys, self.y_from_zero);
        let xt = ticks(xlo, xhi, 8);
        let yt = ticks(ylo, yhi * 1.04, 6);
        let sx = Scale {
            lo: xt[0],
            hi: xt[xt.len() - 1],
            from: LEFT,
            to: right_edge,
        };
        let sy = Scale {
            lo: yt[0],
            hi: yt[yt.len() - 1],
            from: bottom,
            to: TOP,
        };
        let mut o = String::new();
        open(&mut o, &self.title, &self.desc, id);
        y_axis(&mut o, sy, &yt, &self.y_name, LEFT, Some(right_edge));
        let sy2 = if has_right {
            let ys2 = self
                .series
                .iter()
                .filter(|s| s.right)
                .flat_map(|s| s.points.iter().map(|p| p.1));
            let (lo2, hi2) = range(ys2, self.y_from_zero);
            let t2 = ticks(lo2, hi2 * 1.04, 6);
            let s2 = Scale {
                lo: t2[0],
                hi: t2[t2.len() - 1],
                from: bottom,
                to: TOP,
            };
            let name = self.y2_name.as_deref().unwrap_or("");
            y_axis(&mut o, s2, &t2, name, right_edge, None);
            Some(s2)
        } else {
            None
        };
        for &t in &xt {
            let x = sx.at(t);
            let _ = write!(
                o,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{bottom}" y2="{b2}" stroke="#888"/><text x="{x:.1}" y="{ty}" text-anchor="middle" fill="#444">{}</text>"##,
                short(t),
                b2 = bottom + 4.0,
                ty = bottom + 17.0
            );
        }
        let _ = write!(
            o,
            r##"<rect x="{LEFT}" y="{TOP}" width="{w:.1}" height="{h}" fill="none" stroke="#888"/><text x="{cx:.1}" y="{ny}" text-anchor="middle" fill="#222">{}</text>"##,
            esc(&self.x_name),
            w = right_edge - LEFT,
            h = bottom - TOP,
            cx = (LEFT + right_edge) / 2.0,
            ny = bottom + 34.0
        );
        let bar_w = bar_width(&self.series, sx);
        let y2_name = self.y2_name.as_deref().unwrap_or("");
        for s in &self.series {
            let (scale_y, y_axis_name) = match sy2 {
                Some(s2) if s.right => (s2, y2_name),
                _ => (sy, self.y_name.as_str()),
            };
            let units = (unit_of(&self.x_name), unit_of(y_axis_name));
            draw_series(&mut o, s, sx, scale_y, bar_w, units);
        }
        for l in &self.lines {
            draw_ref_line(&mut o, l, sx, sy, right_edge, bottom);
        }
        let mut entries: Vec<(String, &'static str, bool)> = self
            .series
            .iter()
            .map(|s| {
                let side = if s.right && has_right {
                    " (right axis)"
                } else {
                    ""
                };
                (format!("{}{side}", s.name), s.color, s.dashed)
            })
            .collect();
        entries.extend(self.lines.iter().map(|l| (l.label.clone(), l.color, true)));
        legend(&mut o, &entries);
        o.push_str("</svg>");
        o
    }
}

/// Bars a little narrower than the closest pair of x values of any bar series.
fn bar_width(series: &[Series], sx: Scale) -> f64 {
    let mut xs: Vec<f64> = series
        .iter()
        .filter(|s| s.mark == Mark::Bars)
        .flat_map(|s| s.points.iter().map(|p| sx.at(p.0)))
        .collect();
    xs.sort_by(f64::total_cmp);
    let gap = xs
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|g| *g > 0.5)
        .fold(f64::INFINITY, f64::min);
    if gap.is_finite() {
        (gap * 0.35).clamp(2.0, 24.0)
    } else {
        10.0
    }
}

/// Draws one series; `units` (x, y) go into each mark's tooltip.
fn draw_series(o: &mut String, s: &Series, sx: Scale, sy: Scale, bar_w: f64, units: (&str, &str)) {
    let dash = if s.dashed {
        r#" stroke-dasharray="5 3""#
    } else {
        ""
    };
    let _ = write!(o, r#"<g class="series" data-series="{}">"#, esc(&s.name));
    if s.mark == Mark::Line && s.points.len() > 1 {
        let path: Vec<String> = s
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", sx.at(x), sy.at(y)))
            .collect();
        let _ = write!(
            o,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="{}"{dash}/>"#,
            path.join(" "),
            s.color,
            if s.thin {
                r#"0.8" stroke-opacity="0.5"#
            } else {
                "2"
            }
        );
    }
    for &(x, y) in &s.points {
        let (px, py) = (sx.at(x), sy.at(y));
        let tip = format!(
            "{}: {} {} at {} {}",
            s.name,
            short(y),
            units.1,
            short(x),
            units.0
        );
        match s.mark {
            Mark::Bars => {
                let y0 = sy.at(sy.lo.max(0.0).min(sy.hi));
                let _ = write!(
                    o,
                    r#"<rect class="pt" x="{:.1}" y="{:.1}" width="{bar_w:.1}" height="{:.1}" fill="{}" fill-opacity="0.55"><title>{}</title></rect>"#,
                    px - bar_w / 2.0,
                    py.min(y0),
                    (y0 - py).abs(),
                    s.color,
                    esc(&tip)
                );
            }
            Mark::Line | Mark::Points => {
                let _ = write!(
                    o,
                    r#"<circle class="pt" cx="{px:.1}" cy="{py:.1}" r="{}" fill="{}"><title>{}</title></circle>"#,
                    if s.thin { "2" } else { "3.5" },
                    s.color,
                    esc(&tip)
                );
            }
        }
    }
    o.push_str("</g>");
}

fn draw_ref_line(o: &mut String, l: &RefLine, sx: Scale, sy: Scale, right: f64, bottom: f64) {
    let (x1, x2, y1, y2) = if l.vertical {
        let x = sx.at(l.value);
        (x, x, TOP, bottom)
    } else {
        let y = sy.at(l.value);
        (LEFT, right, y, y)
    };
    let _ = write!(
        o,
        r#"<line class="ref" x1="{x1:.1}" x2="{x2:.1}" y1="{y1:.1}" y2="{y2:.1}" stroke="{}" stroke-width="2" stroke-dasharray="6 4"><title>{}</title></line>"#,
        l.color,
        esc(&l.label)
    );
}

/// One category's values in a category chart.
#[derive(Debug, Clone)]
pub struct Category {
    pub name: String,
    pub values: Vec<f64>,
}

/// Bars per category, each bar a stack of named layers (user, system, softirq …).
#[derive(Debug, Clone)]
pub struct StackedBars {
    pub title: String,
    pub desc: String,
    pub x_name: String,
    pub y_name: String,
    pub categories: Vec<String>,
    /// Layer names, bottom first, and each layer's value per category.
    pub layers: Vec<(String, Vec<f64>)>,
    /// The axis top, when the scale is fixed (percentages: 100).
    pub y_max: Option<f64>,
}

/// Box plots of several groups, with every value drawn as a point beside its box.
#[derive(Debug, Clone)]
pub struct BoxChart {
    pub title: String,
    pub desc: String,
    pub x_name: String,
    pub y_name: String,
    pub groups: Vec<Category>,
}

/// The plot frame of a category chart: axes, ticks, names. Returns the y scale and the
/// width of one category's slot.
fn category_frame(
    o: &mut String,
    y_name: &str,
    x_name: &str,
    names: &[String],
    (lo, hi): (f64, f64),
) -> (Scale, f64) {
    let bottom = HEIGHT - BOTTOM;
    let right = WIDTH - RIGHT_PLAIN;
    let yt = ticks(lo, hi, 6);
    let sy = Scale {
        lo: yt[0],
        hi: yt[yt.len() - 1],
        from: bottom,
        to: TOP,
    };
    y_axis(o, sy, &yt, y_name, LEFT, Some(right));
    let slot = (right - LEFT) / names.len().max(1) as f64;
    for (i, n) in names.iter().enumerate() {
        let cx = LEFT + slot * (i as f64 + 0.5);
        let _ = write!(
            o,
            r##"<text x="{cx:.1}" y="{y}" text-anchor="middle" fill="#444">{}</text>"##,
            esc(n),
            y = bottom + 17.0
        );
    }
    let _ = write!(
        o,
        r##"<rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}" fill="none" stroke="#888"/><text x="{cx}" y="{ny}" text-anchor="middle" fill="#222">{}</text>"##,
        esc(x_name),
        w = right - LEFT,
        h = bottom - TOP,
        cx = (LEFT + right) / 2.0,
        ny = bottom + 34.0
    );
    (sy, slot)
}

impl StackedBars {
    pub fn svg(&self, id: &str) -> String {
        let n = self.categories.len();
        let totals: Vec<f64> = (0..n)
            .map(|i| {
                self.layers
                    .iter()
                    .map(|(_, v)| v.get(i).copied().filter(|x| x.is_finite()).unwrap_or(0.0))
                    .sum()
            })
            .collect();
        let top = self
            .y_max
            .unwrap_or_else(|| totals.iter().copied().fold(0.0, f64::max) * 1.05);
        let mut o = String::new();
        open(&mut o, &self.title, &self.desc, id);
        let (sy, slot) = category_frame(
            &mut o,
            &self.y_name,
            &self.x_name,
            &self.categories,
            (0.0, top),
        );
        let w = (slot * 0.6).min(70.0);
        for (i, cat) in self.categories.iter().enumerate() {
            let cx = LEFT + slot * (i as f64 + 0.5);
            let mut base = 0.0;
            for (li, (name, values)) in self.layers.iter().enumerate() {
                let v = values
                    .get(i)
                    .copied()
                    .filter(|x| x.is_finite())
                    .unwrap_or(0.0);
                if v <= 0.0 {
                    continue;
                }
                let (y0, y1) = (sy.at(base), sy.at(base + v));
                let _ = write!(
                    o,
                    r#"<rect class="pt" x="{:.1}" y="{y1:.1}" width="{w:.1}" height="{:.1}" fill="{}"><title>{}</title></rect>"#,
                    cx - w / 2.0,
                    (y0 - y1).max(0.0),
                    PALETTE[li % PALETTE.len()],
                    esc(&format!("{cat} {name}: {}", short(v)))
                );
                base += v;
            }
        }
        let entries: Vec<(String, &'static str, bool)> = self
            .layers
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.clone(), PALETTE[i % PALETTE.len()], false))
            .collect();
        legend(&mut o, &entries);
        o.push_str("</svg>");
        o
    }
}

/// Quartiles by linear interpolation between order statistics (Hyndman and Fan's type 7,
/// the default of R and NumPy) of sorted finite values.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let (i, f) = (h.floor() as usize, h.fract());
    let next = sorted.get(i + 1).copied().unwrap_or(sorted[i]);
    Some(sorted[i] + f * (next - sorted[i]))
}

/// The five figures a box shows: whiskers at the furthest values within 1.5 IQR of the
/// box (Tukey), so a value beyond them stands out as a point of its own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoxStats {
    pub low_whisker: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub high_whisker: f64,
}

impl BoxStats {
    pub fn of(values: &[f64]) -> Option<BoxStats> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let (q1, median, q3) = (quantile(&v, 0.25)?, quantile(&v, 0.5)?, quantile(&v, 0.75)?);
        let reach = 1.5 * (q3 - q1);
        let low_whisker = v.iter().copied().find(|x| *x >= q1 - reach).unwrap_or(q1);
        let high_whisker = v
            .iter()
            .rev()
            .copied()
            .find(|x| *x <= q3 + reach)
            .unwrap_or(q3);
        Some(BoxStats {
            low_whisker: low_whisker.min(q1),
            q1,
            median,
            q3,
            high_whisker: high_whisker.max(q3),
        })
    }
}

impl BoxChart {
    pub fn svg(&self, id: &str) -> String {
        let all = self.groups.iter().flat_map(|g| g.values.iter().copied());
        let (lo, hi) = range(all, true);
        let names: Vec<String> = self.groups.iter().map(|g| g.name.clone()).collect();
        let mut o = String::new();
        open(&mut o, &self.title, &self.desc, id);
        let (sy, slot) =
            category_frame(&mut o, &self.y_name, &self.x_name, &names, (lo, hi * 1.05));
        let w = (slot * 0.3).min(60.0);
        for (i, g) in self.groups.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let cx = LEFT + slot * (i as f64 + 0.5) - w * 0.45;
            if let Some(b) = BoxStats::of(&g.values) {
                let _ = write!(
                    o,
                    r##"<g class="box"><title>{tip}</title><line x1="{cx:.1}" x2="{cx:.1}" y1="{:.1}" y2="{:.1}" stroke="#333"/><line x1="{cx:.1}" x2="{cx:.1}" y1="{:.1}" y2="{:.1}" stroke="#333"/><rect x="{:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" fill="{color}" fill-opacity="0.25" stroke="{color}" stroke-width="1.5"/><line x1="{:.1}" x2="{:.1}" y1="{my:.1}" y2="{my:.1}" stroke="{color}" stroke-width="3"/></g>"##,
                    sy.at(b.high_whisker),
                    sy.at(b.q3),
                    sy.at(b.q1),
                    sy.at(b.low_whisker),
                    cx - w / 2.0,
                    sy.at(b.q3),
                    (sy.at(b.q1) - sy.at(b.q3)).max(0.5),
                    cx - w / 2.0,
                    cx + w / 2.0,
                    my = sy.at(b.median),
                    tip = esc(&format!(
                        "{}: median {}, quartiles {} to {}, whiskers {} to {}",
                        g.name,
                        short(b.median),
                        short(b.q1),
                        short(b.q3),
                        short(b.low_whisker),
                        short(b.high_whisker)
                    )),
                );
            }
            // the values themselves, spread sideways so equal ones stay visible
            let n = g.values.len().max(1) as f64;
            for (k, v) in g.values.iter().enumerate().filter(|(_, v)| v.is_finite()) {
                let jitter = (k as f64 / n - 0.5) * w * 0.6;
                let _ = write!(
                    o,
                    r#"<circle class="pt" cx="{:.1}" cy="{:.1}" r="3.5" fill="{color}" fill-opacity="0.8"><title>{}</title></circle>"#,
                    cx + w * 0.95 + jitter,
                    sy.at(*v),
                    esc(&format!("{} run {}: {}", g.name, k + 1, short(*v)))
                );
            }
        }
        let entries: Vec<(String, &'static str, bool)> = self
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let label = format!(
                    "{} ({} run{})",
                    g.name,
                    g.values.len(),
                    plural(g.values.len())
                );
                (label, PALETTE[i % PALETTE.len()], false)
            })
            .collect();
        legend(&mut o, &entries);
        o.push_str("</svg>");
        o
    }
}

pub fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let t = ticks(0.0, 9.3, 5);
        assert_eq!(t.first(), Some(&0.0));
        assert!(*t.last().unwrap() >= 9.3);
        assert_eq!(t[1] - t[0], 2.0);
        let t = ticks(3.0, 3.0, 5);
        assert!(t.len() >= 2);
        let t = ticks(f64::NAN, 1.0, 5);
        assert!(t.len() >= 2);
    }

    #[test]
    fn axis_units() {
        assert_eq!(unit_of("goodput (Gbit/s)"), "Gbit/s");
        assert_eq!(
            unit_of("retransmits (segments per interval)"),
            "segments per interval"
        );
        assert_eq!(unit_of("group"), "");
    }

    #[test]
    fn short_numbers() {
        assert_eq!(short(12.345), "12.3");
        assert_eq!(short(2.0), "2");
        assert_eq!(short(0.125), "0.125");
        assert_eq!(short(1500.0), "1500");
        assert_eq!(short(f64::INFINITY), "-");
    }

    #[test]
    fn quartiles_and_whiskers() {
        let v = [1.0, 2.0, 3.0, 4.0, 100.0];
        let b = BoxStats::of(&v).unwrap();
        assert_eq!((b.q1, b.median, b.q3), (2.0, 3.0, 4.0));
        // 100 is beyond 4 + 1.5 × 2: the whisker stops at 4 and 100 stands alone
        assert_eq!(b.high_whisker, 4.0);
        assert_eq!(b.low_whisker, 1.0);
        assert_eq!(BoxStats::of(&[]), None);
        assert_eq!(BoxStats::of(&[f64::NAN]), None);
        let one = BoxStats::of(&[7.0]).unwrap();
        assert_eq!((one.low_whisker, one.high_whisker), (7.0, 7.0));
    }

    #[test]
    fn text_is_escaped() {
        let c = XyChart {
            title: "a<b & \"c\"".into(),
            desc: "d".into(),
            x_name: "x".into(),
            y_name: "y".into(),
            y2_name: None,
            series: vec![Series::new(
                "s<1>",
                vec![(0.0, 1.0), (1.0, f64::NAN)],
                Mark::Line,
                0,
            )],
            lines: vec![],
            y_from_zero: true,
            x_from_zero: true,
        };
        let s = c.svg("c1");
        assert!(s.contains("a&lt;b &amp; &quot;c&quot;"));
        assert!(!s.contains("s<1>"));
        assert!(!s.contains("NaN"));
    }
}
