//! Output helpers: `--json` (pretty JSON on stdout), and for humans
//! aligned tables, durations, byte sizes. Below the command line, the
//! benches and the demo, which all print through it.

use std::fmt::Write as _;

/// Prints a value as pretty JSON on stdout (every `--json`).
pub fn print_json<T: serde::Serialize>(v: &T) -> color_eyre::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Renders rows as left-aligned columns (numbers right-aligned).
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let numeric: Vec<bool> = (0..header.len())
        .map(|i| {
            !rows.is_empty()
                && rows.iter().all(|r| {
                    r.get(i).is_some_and(|c| {
                        c.chars()
                            .next()
                            .is_some_and(|ch| ch.is_ascii_digit() || ch == '-')
                            && c.chars()
                                .all(|ch| ch.is_ascii_digit() || ".-,%msµkKMGiB ".contains(ch))
                    })
                })
        })
        .collect();
    let mut out = String::new();
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let mut first = true;
        for (i, c) in cells.enumerate() {
            if !first {
                out.push_str("  ");
            }
            first = false;
            let w = widths.get(i).copied().unwrap_or(0);
            let pad = w.saturating_sub(c.chars().count());
            if numeric.get(i).copied().unwrap_or(false) {
                let _ = write!(out, "{}{}", " ".repeat(pad), c);
            } else {
                let _ = write!(out, "{}{}", c, " ".repeat(pad));
            }
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('\n');
    };
    line(&mut out, &mut header.iter().copied());
    for r in rows {
        line(&mut out, &mut r.iter().map(String::as_str));
    }
    out
}

/// A millisecond duration the way an operator reads it: `950ms`, `42s`, `3m12s`, `2h05m`, `3d04h`.
pub fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        _ if ms < 1000 => format!("{ms}ms"),
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// Bytes with a binary unit: `512B`, `1.5KiB`, `20.0MiB`.
pub fn bytes(n: i64) -> String {
    let neg = n < 0;
    let v = n.unsigned_abs() as f64;
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v2 = v;
    let mut u = 0;
    while v2 >= 1024.0 && u < units.len() - 1 {
        v2 /= 1024.0;
        u += 1;
    }
    let sign = if neg { "-" } else { "" };
    if u == 0 {
        format!("{sign}{}B", v as u64)
    } else {
        format!("{sign}{v2:.1}{}", units[u])
    }
}

/// A sink's name (`SOURCE/NAME`), or its position from a node that sends
/// none.
pub fn sink_label(name: &str, index: u16) -> String {
    if name.is_empty() {
        index.to_string()
    } else {
        name.to_owned()
    }
}

/// A DLQ row's sink as operators name it, `SOURCE/NAME`; `SOURCE/POSITION`
/// from a node that sends no name.
pub fn dlq_sink(name: &str, source: &str, index: u16) -> String {
    if name.is_empty() {
        format!("{source}/{index}")
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_naturally() {
        assert_eq!(age(950), "950ms");
        assert_eq!(age(42_000), "42s");
        assert_eq!(age(192_000), "3m12s");
        assert_eq!(age(7_500_000), "2h05m");
        assert_eq!(age(3 * 86_400_000 + 4 * 3_600_000), "3d04h");
    }

    #[test]
    fn bytes_use_binary_units() {
        assert_eq!(bytes(512), "512B");
        assert_eq!(bytes(1536), "1.5KiB");
        assert_eq!(bytes(-2048), "-2.0KiB");
    }

    #[test]
    fn table_aligns_numbers_right() {
        let t = table(
            &["tenant", "pending"],
            &[
                vec!["a".into(), "5".into()],
                vec!["bbb".into(), "1234".into()],
            ],
        );
        assert_eq!(t, "tenant  pending\na             5\nbbb        1234\n");
    }
}
