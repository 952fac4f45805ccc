//! A fleet's metrics (docs/fleet.md, "Metrics of a fleet").
//!
//! - `every_sample_carries_the_node_label`: every sample line a real
//!   daemon's `/metrics` exports, parsed by the text format's rules
//!   (escaped label values included), has exactly one `node` label with
//!   the node's id, so one Prometheus scraping the fleet sums by node.

use crate::common;

use common::{client, config_with, metrics_text, write_config, Daemon};

/// One sample line: its metric name, its labels (unescaped) and its value.
fn parse_sample(line: &str) -> (String, Vec<(String, String)>, f64) {
    let end = line.find(['{', ' ']).unwrap_or(line.len());
    let (name, mut rest) = line.split_at(end);
    let mut labels = Vec::new();
    if let Some(mut l) = rest.strip_prefix('{') {
        loop {
            if let Some(after) = l.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = l.find('=').unwrap_or_else(|| panic!("no '=' in {line}"));
            let key = l[..eq].to_owned();
            let mut chars = l[eq + 1..]
                .strip_prefix('"')
                .unwrap_or_else(|| panic!("unquoted value in {line}"))
                .char_indices();
            let mut value = String::new();
            let close = loop {
                match chars.next() {
                    Some((_, '\\')) => match chars.next() {
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, c)) => value.push(c),
                        None => panic!("dangling escape in {line}"),
                    },
                    Some((i, '"')) => break i,
                    Some((_, c)) => value.push(c),
                    None => panic!("unterminated value in {line}"),
                }
            };
            labels.push((key, value));
            l = &l[eq + 1 + 1 + close + 1..];
            l = l.strip_prefix(',').unwrap_or(l);
        }
    }
    let value = rest
        .trim()
        .split(' ')
        .next()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no value in {line}"));
    (name.to_owned(), labels, value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sample_carries_the_node_label() {
    let dir = tempfile::tempdir().unwrap();
    // Dispatch off: the rows stay pending, so the per-tenant family has
    // samples, one of them for a tenant whose id needs escaping.
    write_config(
        dir.path(),
        &config_with(
            "[node]\nid = \"eu-1\"\n",
            "[[sources]]\nid = \"s\"\ntenant_header = \"x-tenant\"\n[[sources.sinks]]\nurl = \"http://127.0.0.1:9/\"\n",
        ),
    );
    let d = Daemon::start(dir.path());
    let c = client();
    for tenant in ["acme", "we\"ird\\one"] {
        let r = c
            .post(d.url("s"))
            .header("x-tenant", tenant)
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
    }
    let text = metrics_text(&c, &d).await;
    let mut families = std::collections::BTreeSet::new();
    let mut samples = 0;
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, labels, _) = parse_sample(line);
        let nodes: Vec<&str> = labels
            .iter()
            .filter(|(k, _)| k == "node")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(nodes, ["eu-1"], "{line}");
        families.insert(name);
        samples += 1;
    }
    // The parse saw the real page: the escaped tenant, the node's info,
    // the store's gauges and the process counters.
    assert!(
        text.contains("ankusa_tenant_pending{node=\"eu-1\",tenant=\"we\\\"ird\\\\one\"} 1"),
        "{text}"
    );
    for f in [
        "ankusa_node_info",
        "ankusa_queue_rows",
        "ankusa_ingest_requests_total",
        "ankusa_ingest_ack_seconds_bucket",
        "ankusa_store_rows_total",
    ] {
        assert!(families.contains(f), "{f} missing from\n{text}");
    }
    eprintln!(
        "/metrics: {samples} samples in {} series names, each with node=\"eu-1\"",
        families.len()
    );
    d.stop_clean();
}
