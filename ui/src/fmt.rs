//! Number, size, age and time formatting for narrow terminals.

/// `1234567` → `1,234,567`.
pub fn num(n: i64) -> String {
    let s = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in s.chars().enumerate() {
        // `%` rather than `is_multiple_of`: the workspace's MSRV is 1.80.
        #[allow(clippy::manual_is_multiple_of)]
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in binary units, at most 7 characters.
pub fn bytes(n: i64) -> String {
    let v = n.max(0) as f64;
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = v;
    let mut u = 0;
    while x >= 1024.0 && u < UNITS.len() - 1 {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n}B")
    } else if x < 10.0 {
        format!("{x:.1}{}", UNITS[u])
    } else {
        format!("{x:.0}{}", UNITS[u])
    }
}

/// A duration in ms, short: `0.4s`, `12s`, `3m12s`, `4h03m`, `2d04h`.
pub fn age(ms: u64) -> String {
    let s = ms / 1000;
    if ms < 10_000 {
        format!("{}.{}s", ms / 1000, (ms % 1000) / 100)
    } else if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600)
    }
}

/// ms since the epoch as `YYYY-MM-DD HH:MM:SS` (UTC).
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Cuts a string to `max` characters with an ellipsis.
/// `s` in quotes, cut to `max` characters: what an operator typed, inside a
/// status line that must fit the footer.
pub fn quoted(s: &str, max: usize) -> String {
    format!("{:?}", cut(s, max))
}

/// Widths for columns that want `need` characters each but can do with
/// `min`, within `room`: every column gets its need when they fit (nothing
/// is cut while there is space), else the widest column above its minimum
/// gives up a character at a time, so the cut falls where there is most to
/// spare. Below every minimum the minimums are returned (the table cuts).
pub fn fit(cols: &[(usize, usize)], room: usize) -> Vec<usize> {
    let mut w: Vec<usize> = cols.iter().map(|&(need, min)| need.max(min)).collect();
    let mut total: usize = w.iter().sum();
    while total > room {
        let widest = w
            .iter()
            .enumerate()
            .filter(|&(i, &x)| x > cols[i].1)
            .max_by_key(|&(i, &x)| (x - cols[i].1, std::cmp::Reverse(i)))
            .map(|(i, _)| i);
        let Some(i) = widest else { break };
        w[i] -= 1;
        total -= 1;
    }
    w
}

/// `s` cut in the middle to `max` characters, keeping a third of the room
/// for its start and the rest for its end: names that share a start
/// (`tenant-000002`, `billing/ledger-…`) differ at the end, and the start
/// still says which kind of name it is.
pub fn cut_mid(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_owned();
    }
    if max < 5 {
        return cut_left(s, max);
    }
    let head = (max - 1) / 3;
    let tail = max - 1 - head;
    let mut out: String = s.chars().take(head).collect();
    out.push('…');
    out.extend(s.chars().skip(n - tail));
    out
}

/// `s` cut from the left to `max` characters (a path's end says most).
pub fn cut_left(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        s.to_owned()
    } else {
        format!("…{}", s.chars().skip(n + 1 - max).collect::<String>())
    }
}

pub fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// A rate per second in at most 7 characters: `0.4/s`, `12/s`, `3.2k/s`.
pub fn per_s(r: f64) -> String {
    if r < 10.0 {
        format!("{r:.1}/s")
    } else if r < 10_000.0 {
        format!("{r:.0}/s")
    } else {
        format!("{:.1}k/s", r / 1000.0)
    }
}

/// The last `width` values as a one-line bar chart (`▁` to `█`, scaled to
/// the largest shown; 0 is `▁`): a sparkline inside a line of text.
pub fn spark(values: &[u64], width: usize) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let shown = &values[values.len().saturating_sub(width)..];
    let max = shown.iter().copied().max().unwrap_or(0).max(1);
    shown
        .iter()
        .map(|&v| {
            // Non-zero values start at the second bar, so a trickle is seen.
            let i = if v == 0 {
                0
            } else {
                1 + (v.saturating_mul(6) / max) as usize
            };
            BARS[i.min(7)]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_grow_into_the_room_before_anything_is_cut() {
        assert_eq!(fit(&[(8, 6), (29, 14), (12, 8)], 80), vec![8, 29, 12]);
        // Short by 9: the hook column has most to spare and gives it up.
        assert_eq!(fit(&[(8, 6), (29, 14), (12, 8)], 40), vec![8, 20, 12]);
        // Then evenly above the minimums.
        assert_eq!(fit(&[(20, 6), (29, 14), (20, 8)], 40), vec![10, 18, 12]);
        assert_eq!(fit(&[(8, 6), (29, 14)], 5), vec![6, 14]);
    }

    #[test]
    fn a_cut_in_the_middle_keeps_both_ends() {
        assert_eq!(cut_mid("tenant-000002", 11), "ten…-000002");
        assert_eq!(
            cut_mid("billing/ledger-reconciliation", 15),
            "bill…nciliation"
        );
        assert_eq!(cut_mid("short", 11), "short");
        assert_eq!(cut_mid("tenant-000002", 11).chars().count(), 11);
    }

    #[test]
    fn sparks_scale_to_the_largest_and_show_a_trickle() {
        assert_eq!(spark(&[0, 1, 6, 3], 10), "▁▃█▅");
        assert_eq!(
            spark(&[100, 0, 1], 2),
            "▁█",
            "the last `width` values, rescaled"
        );
        assert_eq!(spark(&[], 5), "");
        assert_eq!(per_s(0.26), "0.3/s");
        assert_eq!(per_s(12.4), "12/s");
        assert_eq!(per_s(32_100.0), "32.1k/s");
    }

    #[test]
    fn formats() {
        assert_eq!(num(0), "0");
        assert_eq!(num(1234567), "1,234,567");
        assert_eq!(num(-1000), "-1,000");
        assert_eq!(bytes(512), "512B");
        assert_eq!(bytes(1536), "1.5KiB");
        assert_eq!(bytes(50 * 1024 * 1024), "50MiB");
        assert_eq!(age(400), "0.4s");
        assert_eq!(age(12_000), "12s");
        assert_eq!(age(192_000), "3m12s");
        assert_eq!(age(4 * 3_600_000 + 180_000), "4h03m");
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_700_000_000_000), "2023-11-14 22:13:20");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(cut("abcdef", 4), "abc…");
    }
}
