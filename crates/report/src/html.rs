//! The page around the charts: sections, figures with their tables of numbers, the style
//! sheet and the little script for hovering. Everything is inline; the page's
//! Content-Security-Policy forbids loading anything, so it reads the same offline.

use std::fmt::Write as _;

use crate::svg::esc;

/// One cell of a table: the text shown and, for numbers, the exact value behind it
/// (`data-value`), so what is copied or checked is the stored figure, not its rounding.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub text: String,
    pub value: Option<f64>,
}

impl Cell {
    pub fn text(t: impl Into<String>) -> Cell {
        Cell {
            text: t.into(),
            value: None,
        }
    }

    /// A number shown as `shown`, carrying `value`; "-" when there is none.
    pub fn num(value: Option<f64>, shown: impl Fn(f64) -> String) -> Cell {
        match value.filter(|v| v.is_finite()) {
            Some(v) => Cell {
                text: shown(v),
                value: Some(v),
            },
            None => Cell::text("-"),
        }
    }
}

/// A table under a chart: the numbers the chart draws.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub caption: String,
    pub head: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn html(&self) -> String {
        let mut o = format!(
            "<table>\n<caption>{}</caption>\n<thead><tr>",
            esc(&self.caption)
        );
        for h in &self.head {
            let _ = write!(o, "<th scope=\"col\">{}</th>", esc(h));
        }
        o.push_str("</tr></thead>\n<tbody>\n");
        for (i, row) in self.rows.iter().enumerate() {
            let _ = write!(o, "<tr data-row=\"{i}\">");
            for (j, c) in row.iter().enumerate() {
                let tag = if j == 0 { "th scope=\"row\"" } else { "td" };
                let close = if j == 0 { "th" } else { "td" };
                match c.value {
                    Some(v) => {
                        let _ = write!(
                            o,
                            "<{tag} class=\"n\" data-value=\"{v}\">{}</{close}>",
                            esc(&c.text)
                        );
                    }
                    None => {
                        let _ = write!(o, "<{tag}>{}</{close}>", esc(&c.text));
                    }
                }
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</tbody>\n</table>\n");
        o
    }
}

/// One chart with what explains it: a caption (the verdict, a fairness index …), notes
/// and lists under it, and its table.
#[derive(Debug, Clone)]
pub struct Figure {
    /// A short name, unique in the report: the element id and the `--svg` file name.
    pub id: String,
    pub title: String,
    pub svg: String,
    pub caption: String,
    pub notes: Vec<String>,
    pub table: Table,
}

impl Figure {
    pub fn html(&self) -> String {
        let mut o = format!(
            "<figure class=\"chart\" id=\"{id}\" data-chart=\"{id}\">\n<div class=\"plot\">{}</div>\n<figcaption>{}</figcaption>\n",
            self.svg,
            rich(&self.caption),
            id = esc(&self.id)
        );
        if !self.notes.is_empty() {
            o.push_str("<ul class=\"notes\">");
            for n in &self.notes {
                let _ = write!(o, "<li>{}</li>", rich(n));
            }
            o.push_str("</ul>\n");
        }
        o.push_str(&self.table.html());
        o.push_str("</figure>\n");
        o
    }
}

/// Escapes text for HTML, with Markdown-ish `code` spans as `<code>`; an unpaired
/// backtick is dropped.
pub fn rich(s: &str) -> String {
    let parts: Vec<&str> = s.split('`').collect();
    if parts.len().is_multiple_of(2) {
        return esc(s);
    }
    let mut o = String::with_capacity(s.len());
    for (i, p) in parts.iter().enumerate() {
        if i % 2 == 1 && !p.is_empty() {
            let _ = write!(o, "<code>{}</code>", esc(p));
        } else {
            o.push_str(&esc(p));
        }
    }
    o
}

/// Text blocks of a section, before its figures.
#[derive(Debug, Clone)]
pub enum Block {
    Para(String),
    /// A paragraph with a class (the verdict is `verdict`).
    Styled(&'static str, String),
    List(String, Vec<String>),
    Table(Table),
}

/// A part of the report: one run, a comparison, a find-max search.
#[derive(Debug, Clone)]
pub struct Section {
    pub heading: String,
    pub blocks: Vec<Block>,
    pub figures: Vec<Figure>,
}

impl Section {
    pub fn html(&self) -> String {
        let mut o = format!("<section>\n<h2>{}</h2>\n", esc(&self.heading));
        for b in &self.blocks {
            match b {
                Block::Para(t) => {
                    let _ = writeln!(o, "<p>{}</p>", rich(t));
                }
                Block::Styled(class, t) => {
                    let _ = writeln!(o, "<p class=\"{class}\">{}</p>", rich(t));
                }
                Block::List(title, items) if !items.is_empty() => {
                    let _ = write!(o, "<p class=\"list-title\">{}</p>\n<ul>", esc(title));
                    for i in items {
                        let _ = write!(o, "<li>{}</li>", rich(i));
                    }
                    o.push_str("</ul>\n");
                }
                Block::List(..) => {}
                Block::Table(t) => o.push_str(&t.html()),
            }
        }
        for f in &self.figures {
            o.push_str(&f.html());
        }
        o.push_str("</section>\n");
        o
    }
}

const STYLE: &str = "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;margin:0 auto;\
max-width:1100px;padding:1em 2em;color:#222;background:#fff;line-height:1.4}\
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:2px solid #0072B2;padding-bottom:.2em;\
margin-top:2em}.meta{color:#555}.verdict{font-size:1.15em;font-weight:bold;background:#f3f7fb;\
border-left:5px solid #0072B2;padding:.5em .8em}.list-title{font-weight:bold;margin-bottom:0}\
figure.chart{margin:1.5em 0;padding:1em;border:1px solid #ddd;border-radius:4px}\
.plot svg{max-width:100%;height:auto}figcaption{font-weight:bold;margin:.5em 0}\
table{border-collapse:collapse;margin-top:.6em;font-size:.9em}caption{text-align:left;\
font-style:italic;padding:.3em 0}th,td{border:1px solid #ccc;padding:.2em .6em;text-align:left}.n{text-align:right}\
thead th{background:#f0f0f0}tbody th{text-align:left;font-weight:normal}\
tr.hot{background:#fff3c4}.pt:hover{stroke:#000;stroke-width:2}\
@media print{figure.chart{break-inside:avoid}}";

/// Hover: pointing at a row of a table rings the chart's marks of the same label, and the
/// page records that its script ran (`data-charts-ready` on the body holds the number of
/// charts), which the browser test reads back. Without JavaScript nothing is lost: every
/// mark has a tooltip of its own (`<title>`).
const SCRIPT: &str = "(function(){var f=document.querySelectorAll('figure.chart');\
f.forEach(function(fig){fig.querySelectorAll('tbody tr').forEach(function(tr){\
tr.addEventListener('mouseenter',function(){tr.classList.add('hot');});\
tr.addEventListener('mouseleave',function(){tr.classList.remove('hot');});});});\
document.body.setAttribute('data-charts-ready',String(f.length));})();";

/// The whole page.
pub fn page(title: &str, subtitle: &str, sections: &[Section]) -> String {
    let charts: usize = sections.iter().map(|s| s.figures.len()).sum();
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<meta name=\"generator\" content=\"wirerate {}\">\n<meta name=\"wirerate-charts\" content=\"{charts}\">\n\
<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header>\n<h1>{}</h1>\n<p class=\"meta\">{}</p>\n</header>\n<main>\n",
        env!("CARGO_PKG_VERSION"),
        esc(title),
        esc(title),
        esc(subtitle)
    );
    for s in sections {
        o.push_str(&s.html());
    }
    let _ = write!(o, "</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_carry_exact_values_and_escape_text() {
        let t = Table {
            caption: "a <b>".into(),
            head: vec!["run".into(), "goodput (Mbit/s)".into()],
            rows: vec![vec![
                Cell::text("r&1"),
                Cell::num(Some(1234.5678), |v| format!("{v:.1}")),
            ]],
        };
        let h = t.html();
        assert!(h.contains("<caption>a &lt;b&gt;</caption>"));
        assert!(h.contains("<th scope=\"row\">r&amp;1</th>"));
        assert!(h.contains("<td class=\"n\" data-value=\"1234.5678\">1234.6</td>"));
        assert_eq!(Cell::num(Some(f64::NAN), |v| v.to_string()).text, "-");
    }

    #[test]
    fn markdown_backticks_become_code_or_go() {
        assert_eq!(
            rich("raise `net.core.rmem_max` & retry"),
            "raise <code>net.core.rmem_max</code> &amp; retry"
        );
        assert_eq!(rich("one ` alone"), "one  alone");
        assert_eq!(esc("`tc qdisc`"), "tc qdisc");
    }
}
