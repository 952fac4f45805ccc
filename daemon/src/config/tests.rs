//! Unit tests of `config`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use base64::Engine as _;

fn encode_secret(key: &[u8]) -> String {
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

fn parse(text: &str) -> Result<Settings, ConfigError> {
    Settings::parse(text, Path::new("ankusa.toml"), Path::new("/etc/ankusa"))
}

const MINIMAL: &str = r#"
[store]
path = "data"

[[sources]]
id = "shop"
[[sources.sinks]]
url = "http://127.0.0.1:9000/hooks"
"#;

#[test]
fn minimal_config_takes_every_default() {
    let s = parse(MINIMAL).unwrap();
    assert_eq!(s.store_path, PathBuf::from("/etc/ankusa/data"));
    assert_eq!(s.store_cache, 256 << 20);
    assert_eq!(s.listen, "127.0.0.1:8080".parse().unwrap());
    assert_eq!(s.max_body, 1024 * 1024);
    assert_eq!(s.writer.queue, 4096);
    assert_eq!(s.writer.linger, Duration::ZERO);
    assert_eq!(s.writer.dedupe_ttl, Duration::from_secs(86_400));
    assert_eq!(s.writer.tenants_max, 1_000_000);
    assert_eq!(s.sources[0].tenant, TenantRule::Fixed("default".into()));
    assert_eq!(s.sources[0].sinks.len(), 1);
    assert!(!s.archive.enabled);
    assert!(!s.writer.archive);
}

#[test]
fn the_archive_needs_a_dir_and_checks_its_ranges() {
    let on = MINIMAL.replace(
        "[[sources]]",
        "[archive]\nenabled = true\ndir = \"arch\"\nmax_file_age = \"10m\"\n\n[[sources]]",
    );
    let s = parse(&on).unwrap();
    assert!(s.archive.enabled && s.writer.archive);
    assert_eq!(s.archive.dir, PathBuf::from("/etc/ankusa/arch"));
    assert_eq!(s.archive.max_file_age, Duration::from_secs(600));
    assert_eq!(s.archive.max_file_bytes, 64 * 1024 * 1024);

    let no_dir = MINIMAL.replace("[[sources]]", "[archive]\nenabled = true\n\n[[sources]]");
    let e = parse(&no_dir).unwrap_err().to_string();
    assert!(e.contains("archive.dir"), "{e}");
    assert!(e.contains("line 5"), "{e}");

    let small = MINIMAL.replace(
        "[[sources]]",
        "[archive]\nenabled = true\ndir = \"a\"\nmax_file_bytes = 10\n\n[[sources]]",
    );
    let e = parse(&small).unwrap_err().to_string();
    assert!(e.contains("max_file_bytes") && e.contains("line 8"), "{e}");
}

#[test]
fn the_example_config_parses() {
    let text = include_str!("../../../ankusa.example.toml");
    let s = parse(text).unwrap();
    assert!(s.sources.len() >= 2);
}

/// The examples in docs/configuration.md are configs that load.
#[test]
fn the_documented_examples_parse() {
    let doc = include_str!("../../../docs/configuration.md");
    let blocks: Vec<&str> = doc
        .split("```toml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    assert_eq!(
        blocks.len(),
        3,
        "docs/configuration.md has three toml examples"
    );
    for b in blocks {
        parse(b).unwrap_or_else(|e| panic!("{e}\nin\n{b}"));
    }
}

/// Issue 32: `event_type` and `events` are checked, and a sink's
/// events need the source's event_type.
#[test]
fn routing_keys_are_checked() {
    let routed = MINIMAL
        .replace("id = \"shop\"", "id = \"shop\"\nevent_type = { json = \"/type\" }")
        .replace(
            "url = \"http://127.0.0.1:9000/hooks\"",
            "url = \"http://127.0.0.1:9000/hooks\"\nevents = [\"invoice.*\", \"customer.created\"]\n[[sources.sinks]]\nurl = \"http://127.0.0.1:9001/\"",
        );
    let s = parse(&routed).unwrap();
    let src = &s.sources[0];
    assert_eq!(
        src.route(Some("invoice.paid")),
        ankusa_store::transitions::SinkSet::first(2)
    );
    assert_eq!(
        src.route(Some("order.paid")),
        ankusa_store::transitions::SinkSet::of([1])
    );
    assert_eq!(src.route(None), ankusa_store::transitions::SinkSet::of([1]));
    let no_source_type = routed.replace("event_type = { json = \"/type\" }\n", "");
    let e = parse(&no_source_type).unwrap_err().to_string();
    assert!(e.contains("events needs the source's event_type"), "{e}");
    for (bad, says) in [
        ("events = [\"in*voice\"", "may only end a pattern"),
        ("events = [\"\"", "not an event type"),
    ] {
        let text = routed.replace("events = [\"invoice.*\"", bad);
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains(says) && e.contains("sinks[0].events"), "{e}");
    }
    let e = parse(&routed.replace(
        "events = [\"invoice.*\", \"customer.created\"]",
        "events = []",
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("retired"), "{e}");
    let e = parse(&routed.replace("{ json = \"/type\" }", "{ json = \"type\" }"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("JSON pointer"), "{e}");
    let e = parse(&routed.replace("{ json = \"/type\" }", "{ body = \"/type\" }"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown variant") || e.contains("body"), "{e}");
    // A retired sink takes nothing, whatever its events.
    let retired = routed.replace(
        "events = [\"invoice.*\", \"customer.created\"]",
        "events = [\"invoice.*\"]\nretired = true",
    );
    let s = parse(&retired).unwrap();
    assert_eq!(
        s.sources[0].route(Some("invoice.paid")),
        ankusa_store::transitions::SinkSet::of([1])
    );
}

#[test]
fn an_unknown_key_names_the_key_and_the_line() {
    let text = MINIMAL.replace("[[sources]]", "[writer]\nlingr = \"2ms\"\n\n[[sources]]");
    let e = parse(&text).unwrap_err().to_string();
    assert!(e.contains("line 6"), "{e}");
    assert!(e.contains("writer.lingr"), "{e}");
    assert!(e.contains("unknown field"), "{e}");
}

#[test]
fn the_store_cache_is_read_in_bytes_and_refused_below_8_mib() {
    let with =
        |v: &str| MINIMAL.replace("path = \"data\"", &format!("path = \"data\"\ncache = {v}"));
    assert_eq!(parse(&with("268435456")).unwrap().store_cache, 256 << 20);
    let e = parse(&with("1048576")).unwrap_err().to_string();
    assert!(
        e.contains("cache") && e.contains("must be between 8388608"),
        "{e}"
    );
}

#[test]
fn an_out_of_range_value_names_the_key_the_line_and_the_range() {
    let text = MINIMAL.replace("[[sources]]", "[writer]\nqueue = 0\n\n[[sources]]");
    let e = parse(&text).unwrap_err().to_string();
    assert!(e.contains("line 6") && e.contains("writer.queue"), "{e}");
    assert!(e.contains("between 1 and 1000000"), "{e}");

    let text = MINIMAL.replace("[[sources]]", "[writer]\nlinger = \"1s\"\n\n[[sources]]");
    let e = parse(&text).unwrap_err().to_string();
    assert!(
        e.contains("writer.linger") && e.contains("between 0s and 100ms"),
        "{e}"
    );
}

#[test]
fn a_bad_duration_says_how_to_write_one() {
    let text = MINIMAL.replace(
        "[[sources]]",
        "[ingest]\ndedupe_ttl = \"forever\"\n\n[[sources]]",
    );
    let e = parse(&text).unwrap_err().to_string();
    assert!(
        e.contains("ingest.dedupe_ttl") && e.contains("not a duration"),
        "{e}"
    );
}

#[test]
fn cross_key_errors_point_at_the_source() {
    let text =
        format!("{MINIMAL}\n[[sources]]\nid = \"shop\"\n[[sources.sinks]]\nurl = \"http://x/\"\n");
    let e = parse(&text).unwrap_err().to_string();
    assert!(
        e.contains("used by two sources") && e.contains("at line 10:"),
        "{e}"
    );

    let text = MINIMAL.replace(
        "id = \"shop\"",
        "id = \"shop\"\ntenant = \"a\"\ntenant_header = \"x-tenant\"",
    );
    let e = parse(&text).unwrap_err().to_string();
    assert!(e.contains("exclusive") && e.contains("at line 5:"), "{e}");
}

#[test]
fn every_source_error_is_reported_not_only_the_first() {
    let text = format!(
        "{}\n[[sources]]\nid = \"blog\"\ntenant = \"a\"\ntenant_header = \"x-t\"\n[[sources.sinks]]\nurl = \"http://x/\"\n",
        MINIMAL.replace(
            "id = \"shop\"",
            "id = \"shop\"\ntenant = \"a\"\ntenant_header = \"x-tenant\""
        )
    );
    let e = parse(&text).unwrap_err().to_string();
    assert_eq!(e.matches("exclusive").count(), 2, "{e}");
    assert!(e.contains("at line 5:") && e.contains("at line 12:"), "{e}");
}

#[test]
fn secrets_are_checked_and_never_printed() {
    let text = MINIMAL.replace(
        "id = \"shop\"",
        "id = \"shop\"\nsigning_secret = \"nope-not-base64\"",
    );
    let e = parse(&text).unwrap_err().to_string();
    assert!(
        e.contains("signing_secret") && !e.contains("nope-not-base64"),
        "{e}"
    );

    let secret = encode_secret(b"0123456789abcdef0123");
    let text = MINIMAL.replace(
        "id = \"shop\"",
        &format!("id = \"shop\"\ntoken = \"tok-12345678\"\nsigning_secret = \"{secret}\""),
    );
    let s = parse(&text).unwrap();
    let dbg = format!("{:?}", s.sources[0]);
    assert!(
        !dbg.contains("tok-12345678") && !dbg.contains(&secret),
        "{dbg}"
    );
    assert_eq!(
        s.sources[0].signing_keys,
        vec![Expiring::never(b"0123456789abcdef0123".to_vec())]
    );
}

#[test]
fn secrets_and_tokens_rotate_with_an_expiry() {
    let (a, b) = (
        encode_secret(b"0123456789abcdef0123"),
        encode_secret(b"fedcba98765432100123"),
    );
    let text = MINIMAL.replace(
        "id = \"shop\"",
        &format!(
            "id = \"shop\"\ntokens = [{{ token = \"tok-new-123\" }}, {{ token = \"tok-old-123\", expires = \"2026-12-08T12:00:00Z\" }}]\n\
             signing_secrets = [{{ secret = \"{a}\" }}, {{ secret = \"{b}\", expires = \"2026-12-08T12:00:00Z\" }}]"
        ),
    ) + &format!("signing_secrets = [{{ secret = \"{b}\" }}]\n");
    let s = parse(&text).unwrap();
    let src = &s.sources[0];
    let at = 1_796_731_200_000; // 2026-12-08T12:00:00Z
    assert_eq!(src.tokens.len(), 2);
    assert_eq!(src.tokens[1].expires_at, Some(at));
    assert_eq!(live(&src.tokens, at - 1).count(), 2);
    assert_eq!(live(&src.tokens, at).count(), 1, "expired at the instant");
    assert_eq!(src.signing_keys[0].value, b"0123456789abcdef0123");
    assert_eq!(src.sinks[0].signing_keys.len(), 1);
    let dbg = format!("{src:?}");
    assert!(!dbg.contains("tok-new") && !dbg.contains(&a), "{dbg}");

    let both = MINIMAL.replace(
        "id = \"shop\"",
        &format!(
            "id = \"shop\"\nsigning_secret = \"{a}\"\nsigning_secrets = [{{ secret = \"{b}\" }}]"
        ),
    );
    let e = parse(&both).unwrap_err().to_string();
    assert!(
        e.contains("signing_secret and signing_secrets are exclusive"),
        "{e}"
    );
    let bad_time = MINIMAL.replace(
        "id = \"shop\"",
        "id = \"shop\"\ntokens = [{ token = \"tok-new-123\", expires = \"tomorrow\" }]",
    );
    let e = parse(&bad_time).unwrap_err().to_string();
    assert!(
        e.contains("not an RFC 3339 time") && e.contains("line 7"),
        "{e}"
    );
    let short = MINIMAL.replace(
        "id = \"shop\"",
        "id = \"shop\"\ntokens = [{ token = \"short\" }]",
    );
    let e = parse(&short).unwrap_err().to_string();
    assert!(
        e.contains("sources.tokens[0]: must be at least 8") && !e.contains("short"),
        "{e}"
    );
}

#[test]
fn a_breaker_is_off_unless_configured_and_its_keys_are_checked() {
    let s = parse(MINIMAL).unwrap();
    assert!(s.sources[0].sinks[0].breaker.is_none(), "off by default");
    let with = |b: &str| {
        parse(&format!("{MINIMAL}[sources.sinks.breaker]\n{b}"))
            .map(|s| s.sources[0].sinks[0].breaker.clone())
    };
    let b = with("failures = 5\n").unwrap().unwrap();
    assert_eq!(b.failures, Some(Int(5)));
    assert!(b.ratio.is_none());
    assert_eq!(
        (b.window.0, b.min_attempts.0, b.open_for.0, b.open_max.0),
        (
            Duration::from_secs(60),
            20,
            Duration::from_secs(30),
            Duration::from_secs(600)
        )
    );
    let b = with("ratio = 0.5\nwindow = \"30s\"\nmin_attempts = 10\n")
        .unwrap()
        .unwrap();
    assert_eq!(b.ratio, Some(Ratio(0.5)));
    for (bad, says) in [
        ("open_for = \"1m\"\n", "needs a rule"),
        ("failures = 0\n", "between 1 and"),
        ("ratio = 1.5\n", "at most 1"),
        ("ratio = 0.0\n", "above 0"),
        (
            "failures = 3\nopen_for = \"5m\"\nopen_max = \"1m\"\n",
            "shorter than open_for",
        ),
        ("failures = 3\nfailurs = 2\n", "unknown field"),
    ] {
        let e = with(bad).unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn a_source_needs_a_sink_and_a_valid_tenant() {
    let text = "[store]\npath = \"d\"\n[[sources]]\nid = \"a\"\n";
    let e = parse(text).unwrap_err().to_string();
    assert!(e.contains("sinks"), "{e}");
    let text = MINIMAL.replace("id = \"shop\"", "id = \"shop\"\ntenant = \"\"");
    let e = parse(&text).unwrap_err().to_string();
    assert!(e.contains("sources.tenant") && e.contains("empty"), "{e}");
}

fn with_cluster(table: &str) -> Result<Settings, ConfigError> {
    parse(&format!("{MINIMAL}\n[cluster]\n{table}"))
}

const PEERS: &str = r#"peers = [{ id = 1, addr = "127.0.0.1:7101" }, { id = 2, addr = "127.0.0.1:7102" }, { id = 3, addr = "127.0.0.1:7103" }]"#;

#[test]
fn a_cluster_table_is_read_with_its_defaults_beside_the_store() {
    assert!(parse(MINIMAL).unwrap().cluster.is_none());
    let s = with_cluster(&format!(
        "id = 2\nlisten = \"127.0.0.1:7102\"\n{PEERS}\nsecret = \"0123456789abcdef\"\n"
    ))
    .unwrap();
    let c = s.cluster.unwrap();
    assert_eq!((c.id, c.peers.len()), (2, 3));
    assert_eq!(c.log, PathBuf::from("/etc/ankusa/data.raft"));
    assert_eq!(c.snapshots, PathBuf::from("/etc/ankusa/data.snapshots"));
    assert_eq!(c.heartbeat, Duration::from_millis(250));
    assert_eq!(c.election_timeout, Duration::from_secs(1));
    assert!(
        !format!("{c:?}").contains("0123456789abcdef"),
        "the secret stays out of Debug"
    );
}

#[test]
fn a_cluster_table_that_cannot_work_is_refused_naming_why() {
    let cases = [
        (format!("id = 4\nlisten = \"127.0.0.1:7104\"\n{PEERS}\nsecret = \"0123456789abcdef\"\n"), "not among peers"),
        (format!("id = 1\nlisten = \"127.0.0.1:7101\"\n{PEERS}\nsecret = \"short\"\n"), "at least 16"),
        ("id = 1\nlisten = \"127.0.0.1:7101\"\npeers = [{ id = 1, addr = \"127.0.0.1:7101\" }, { id = 1, addr = \"127.0.0.1:7102\" }]\nsecret = \"0123456789abcdef\"\n".to_string(), "twice"),
        (format!("id = 1\nlisten = \"127.0.0.1:7101\"\n{PEERS}\nsecret = \"0123456789abcdef\"\nheartbeat = \"500ms\"\nelection_timeout = \"1s\"\n"), "more than twice heartbeat"),
        (format!("id = 1\nlisten = \"127.0.0.1:7101\"\n{PEERS}\nsecret = \"0123456789abcdef\"\nvoters = 3\n"), "unknown field"),
    ];
    for (table, want) in cases {
        let e = with_cluster(&table).unwrap_err().to_string();
        assert!(e.contains(want), "{want:?} not in {e}");
        assert!(e.contains("ankusa.toml"), "{e}");
    }
}
