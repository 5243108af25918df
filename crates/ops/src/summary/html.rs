//! A [`Summary`] as one self-contained HTML page: bar charts in inline SVG (reads per reference,
//! mean depth per reference, the MAPQ histogram), a table of every reference, and the numbers as
//! JSON in a `<script type="application/json" id="sortase-summary">` block for programs.
//!
//! Charts show the 40 references with the most reads (a genome with thousands of contigs stays
//! readable); the table lists them all.

use super::Summary;
use std::fmt::Write;

/// Bars drawn per reference chart.
const TOP: usize = 40;

/// The page for `summary` of a file named `title` whose references are `(name, length)`.
pub fn render(title: &str, references: &[(String, u64)], summary: &Summary) -> String {
    let mut order: Vec<usize> = (0..references.len()).collect();
    order.sort_by_key(|&i| {
        let c = summary.references[i];
        std::cmp::Reverse(c.mapped + c.unmapped)
    });
    order.truncate(TOP);
    let depth = |i: usize| mean_depth(references, summary, i);
    let reads: Vec<(String, f64)> = order
        .iter()
        .map(|&i| {
            let c = summary.references[i];
            (references[i].0.clone(), (c.mapped + c.unmapped) as f64)
        })
        .collect();
    let depths: Vec<(String, f64)> = order
        .iter()
        .map(|&i| (references[i].0.clone(), depth(i)))
        .collect();
    let top_mapq = summary.mapq.iter().rposition(|&n| n > 0).unwrap_or(0);
    let mut mapq: Vec<(String, f64)> = (0..=top_mapq)
        .map(|q| (q.to_string(), summary.mapq[q] as f64))
        .collect();
    mapq.push(("unmapped".to_string(), summary.unmapped as f64));

    let mut page = String::new();
    let t = escape(title);
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>sortase stats: {t}</title>\n\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{padding:2px 8px;text-align:right}}td:first-child,th:first-child{{text-align:left}}\
         tr:nth-child(even){{background:#f3f3f3}}</style></head><body>\n\
         <h1>{t}</h1>\n<p>{} records: {} mapped, {} unmapped; {} references.</p>\n",
        summary.records(),
        summary.records() - summary.unmapped,
        summary.unmapped,
        references.len()
    );
    page += "<h2>Reads per reference</h2>\n";
    page += &horizontal_bars(&reads, "#4477aa", "{:.0}");
    page += "<h2>Mean depth per reference</h2>\n";
    page += &horizontal_bars(&depths, "#66aa55", "{:.2}");
    page += "<h2>MAPQ histogram (mapped records; unmapped apart)</h2>\n";
    page += &histogram(&mapq);
    reference_table(&mut page, references, summary);
    let json = serde_json_like(references, summary);
    let _ = write!(
        page,
        "<script type=\"application/json\" id=\"sortase-summary\">{json}</script>\n</body></html>\n"
    );
    page
}

/// The table of every reference (and the unplaced reads' row).
fn reference_table(page: &mut String, references: &[(String, u64)], summary: &Summary) {
    *page += "<h2>All references</h2>\n<table>\n<tr><th>reference</th><th>length</th>\
             <th>mapped</th><th>unmapped</th><th>mean depth</th></tr>\n";
    for (i, (name, len)) in references.iter().enumerate() {
        let c = summary.references[i];
        let _ = writeln!(
            page,
            "<tr><td>{}</td><td>{len}</td><td>{}</td><td>{}</td><td>{:.2}</td></tr>",
            escape(name),
            c.mapped,
            c.unmapped,
            mean_depth(references, summary, i)
        );
    }
    let _ = writeln!(
        page,
        "<tr><td>*</td><td>0</td><td>{}</td><td>{}</td><td></td></tr>\n</table>",
        summary.unplaced[0], summary.unplaced[1]
    );
}

/// Mean depth of reference `i`: its aligned bases over its length.
fn mean_depth(references: &[(String, u64)], summary: &Summary, i: usize) -> f64 {
    let len = references[i].1.max(1);
    summary.references[i].aligned_bases as f64 / len as f64
}

/// The numbers as JSON (written by hand: the crate has no JSON dependency and the shape is fixed).
fn serde_json_like(references: &[(String, u64)], summary: &Summary) -> String {
    let mut s = String::from("{\"references\":[");
    for (i, (name, len)) in references.iter().enumerate() {
        let c = summary.references[i];
        if i > 0 {
            s.push(',');
        }
        let _ = write!(
            s,
            "{{\"name\":{},\"length\":{len},\"mapped\":{},\"unmapped\":{},\"aligned_bases\":{}}}",
            json_string(name),
            c.mapped,
            c.unmapped,
            c.aligned_bases
        );
    }
    let mapq: Vec<String> = summary.mapq.iter().map(u64::to_string).collect();
    let _ = write!(
        s,
        "],\"unplaced\":[{},{}],\"mapq\":[{}],\"unmapped\":{},\"records\":{}}}",
        summary.unplaced[0],
        summary.unplaced[1],
        mapq.join(","),
        summary.unmapped,
        summary.records()
    );
    s
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            // `</script>` must not end the block early.
            '<' => out.push_str("\\u003c"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn label(value: f64, format: &str) -> String {
    match format {
        "{:.0}" => format!("{value:.0}"),
        _ => format!("{value:.2}"),
    }
}

/// One horizontal bar per `(label, value)`.
fn horizontal_bars(bars: &[(String, f64)], color: &str, format: &str) -> String {
    let (row, name_w, bar_w) = (18.0, 160.0, 520.0);
    let max = bars.iter().map(|b| b.1).fold(0.0, f64::max).max(1e-9);
    let height = row * bars.len() as f64 + 10.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" \
         font-size=\"12\">\n",
        name_w + bar_w + 90.0
    );
    for (i, (name, value)) in bars.iter().enumerate() {
        let y = row * i as f64 + 4.0;
        let w = bar_w * value / max;
        let short: String = name.chars().take(24).collect();
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{name_w}\" y=\"{y}\" width=\"{w:.1}\" height=\"{}\" fill=\"{color}\">\
             <title>{}: {}</title></rect><text x=\"{:.1}\" y=\"{}\">{}</text>",
            name_w - 6.0,
            y + 12.0,
            escape(&short),
            row - 4.0,
            escape(name),
            label(*value, format),
            name_w + w + 4.0,
            y + 12.0,
            label(*value, format)
        );
    }
    svg += "</svg>\n";
    svg
}

/// Vertical bars, one per `(label, count)`, labels every 10 bars.
fn histogram(bars: &[(String, f64)]) -> String {
    let (bar, plot_h, left) = (8.0, 200.0, 60.0);
    let max = bars.iter().map(|b| b.1).fold(0.0, f64::max).max(1.0);
    let width = left + bar * bars.len() as f64 + 80.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{}\" \
         font-size=\"11\">\n<text x=\"{}\" y=\"12\" text-anchor=\"end\">{max:.0}</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\">0</text>\n",
        plot_h + 40.0,
        left - 6.0,
        left - 6.0,
        plot_h + 10.0
    );
    for (i, (name, count)) in bars.iter().enumerate() {
        let x = left + bar * i as f64;
        let h = plot_h * count / max;
        let color = if name == "unmapped" {
            "#aa4444"
        } else {
            "#4477aa"
        };
        let _ = writeln!(
            svg,
            "<rect x=\"{x}\" y=\"{:.1}\" width=\"{}\" height=\"{h:.1}\" fill=\"{color}\">\
             <title>MAPQ {name}: {count:.0}</title></rect>",
            plot_h + 10.0 - h,
            bar - 1.0
        );
        if i % 10 == 0 || name == "unmapped" {
            let _ = writeln!(svg, "<text x=\"{x}\" y=\"{}\">{name}</text>", plot_h + 26.0);
        }
    }
    svg += "</svg>\n";
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_lists_every_reference_and_escapes_names() {
        let mut s = Summary::new(2);
        s.references[0].mapped = 5;
        s.references[1].unmapped = 2;
        s.mapq[60] = 5;
        s.unmapped = 2;
        let refs = vec![("chr1".to_string(), 100), ("a<b>\"".to_string(), 50)];
        let page = render("x&y.bam", &refs, &s);
        assert!(page.contains("<td>chr1</td><td>100</td><td>5</td><td>0</td>"));
        assert!(page.contains("a&lt;b&gt;&quot;"));
        assert!(page.contains("x&amp;y.bam"));
        assert!(page.contains("\"name\":\"a\\u003cb>\\\"\""));
        assert!(page.contains("\"records\":7"));
        assert_eq!(page.matches("<svg").count(), 3);
    }
}
