//! Unit tests of `fleet`.

use super::*;

fn parse(text: &str) -> Result<Fleet, FleetError> {
    Fleet::parse(
        Path::new("/etc/ankusa/fleet.toml"),
        text,
        Path::new("/etc/ankusa"),
    )
}

#[test]
fn a_fleet_file_names_sockets_and_tcp_nodes_with_tokens() {
    let f = parse(
        r#"
timeout = "500ms"
[[nodes]]
name = "eu-1"
socket = "/run/ankusa/eu-1.sock"
[[nodes]]
name = "eu-2"
socket = "forwarded/eu-2.sock"
[[nodes]]
name = "us-1"
url = "http://10.0.0.1:9090/"
token = "0123456789abcdef"
"#,
    )
    .unwrap();
    assert_eq!(f.timeout, Duration::from_millis(500));
    assert_eq!(
        f.nodes
            .iter()
            .map(|n| (n.name.as_str(), n.transport.to_string()))
            .collect::<Vec<_>>(),
        vec![
            ("eu-1", "/run/ankusa/eu-1.sock".to_owned()),
            ("eu-2", "/etc/ankusa/forwarded/eu-2.sock".to_owned()),
            ("us-1", "http://10.0.0.1:9090".to_owned()),
        ]
    );
    assert_eq!(f.nodes[2].token.as_deref(), Some("0123456789abcdef"));
    assert_eq!(
        parse("[[nodes]]\nname=\"a\"\nsocket=\"s\"\n")
            .unwrap()
            .timeout,
        DEFAULT_TIMEOUT
    );
    assert!(!format!("{:?}", f.nodes[2]).contains("0123456789abcdef"));
}

#[test]
fn a_token_file_is_read_relative_to_the_fleet_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("us-1.token"), "secret-secret-123\n").unwrap();
    let path = dir.path().join("fleet.toml");
    std::fs::write(
        &path,
        "[[nodes]]\nname = \"us-1\"\nurl = \"http://127.0.0.1:9\"\ntoken_file = \"us-1.token\"\n",
    )
    .unwrap();
    let f = Fleet::load(&path).unwrap();
    assert_eq!(f.nodes[0].token.as_deref(), Some("secret-secret-123"));
    let e = Fleet::load(&dir.path().join("nope.toml")).unwrap_err();
    assert!(e.to_string().contains("nope.toml"), "{e}");
}

#[test]
fn mistakes_are_refused_naming_the_file_the_node_and_the_field() {
    let cases: &[(&str, &[&str])] = &[
        (
            "[[nodes]]\nname=\"a\"\nsocket=\"s\"\nport=1\n",
            &["fleet.toml", "unknown field", "port"],
        ),
        (
            "colour = 1\n[[nodes]]\nname=\"a\"\nsocket=\"s\"\n",
            &["unknown field", "colour"],
        ),
        (
            "[[nodes]]\nname=\"a\"\nsocket=\"s\"\n[[nodes]]\nname=\"a\"\nsocket=\"t\"\n",
            &["node \"a\"", "two nodes have this name"],
        ),
        ("[[nodes]]\nname=\"a\"\n", &["node \"a\"", "socket", "url"]),
        (
            "[[nodes]]\nname=\"a\"\nsocket=\"s\"\nurl=\"http://h:1\"\ntoken=\"t\"\n",
            &["not both"],
        ),
        (
            "[[nodes]]\nname=\"a\"\nurl=\"https://h:1\"\ntoken=\"t\"\n",
            &["node \"a\"", "TLS is not supported yet"],
        ),
        (
            "[[nodes]]\nname=\"a\"\nurl=\"http://h:1\"\n",
            &["requires a token"],
        ),
        (
            "[[nodes]]\nname=\"a\"\nurl=\"http://h\"\ntoken=\"t\"\n",
            &["HOST:PORT"],
        ),
        (
            "[[nodes]]\nname=\"a\"\nurl=\"http://h:1/x\"\ntoken=\"t\"\n",
            &["no path"],
        ),
        ("[[nodes]]\nname=\"a b\"\nsocket=\"s\"\n", &["name:"]),
        ("nodes = []\n", &["no [[nodes]]"]),
        (
            "timeout = \"soon\"\n[[nodes]]\nname=\"a\"\nsocket=\"s\"\n",
            &["timeout"],
        ),
        (
            "timeout = \"0s\"\n[[nodes]]\nname=\"a\"\nsocket=\"s\"\n",
            &["timeout"],
        ),
        (
            "[[nodes]]\nname=\"a\"\nsocket=\"s\"\ntoken=\"t\"\ntoken_file=\"f\"\n",
            &["token or token_file"],
        ),
    ];
    for (text, words) in cases {
        let e = parse(text).expect_err(text).to_string();
        assert!(e.contains("/etc/ankusa/fleet.toml"), "{e}");
        for w in *words {
            assert!(e.contains(w), "{text:?}: {e:?} lacks {w:?}");
        }
    }
}

fn figures(node: &str, tenants: &[(&str, i64, i64)]) -> NodeFigures {
    let mut c = Counters::default();
    let rows: Vec<TenantInfo> = tenants
        .iter()
        .enumerate()
        .map(|(i, (id, pending, dead))| {
            let t = Counters {
                pending: *pending,
                dead: *dead,
                bytes: pending * 10,
                ..Counters::default()
            };
            add_counters(&mut c, &t);
            TenantInfo {
                ord: i as u32 + 1,
                id: (*id).to_owned(),
                counters: t,
                totals: Totals::default(),
            }
        })
        .collect();
    NodeFigures {
        stats: Stats {
            store: format!("/srv/{node}"),
            format: 3,
            node: c,
            totals: Totals {
                accepted: c.pending as u64 * 2,
                ..Totals::default()
            },
            oldest_due_age_ms: None,
            tenants: rows.len() as u32,
            active_tenants: 0,
            active_exact: true,
            daemon: None,
        },
        state: NodeState {
            node: None,
            draining: None,
            owed: c.pending as u64,
            dead: c.dead as u64,
            empty: c.pending == 0,
        },
        tenants: TenantsPage {
            tenants: rows,
            next: None,
            paused: vec!["b".into()],
            policies: Vec::new(),
        },
    }
}

fn answer(node: &str, r: Result<NodeFigures, String>) -> Answer<NodeFigures> {
    Answer {
        node: node.into(),
        endpoint: format!("/run/{node}.sock"),
        result: r,
        took: Duration::ZERO,
    }
}

#[test]
fn the_merge_sums_the_answering_nodes_and_names_the_unreachable_one() {
    let answers = vec![
        answer("eu-1", Ok(figures("eu-1", &[("a", 5, 1), ("b", 1, 0)]))),
        answer("eu-2", Err("no answer within 2s".into())),
        answer("eu-3", Ok(figures("eu-3", &[("a", 2, 0), ("c", 9, 3)]))),
    ];
    let m = merge_tenants(&answers, Some("pending"));
    assert_eq!(m.totals.pending, 5 + 1 + 2 + 9);
    assert_eq!(m.totals.dead, 4);
    assert_eq!(m.totals.bytes, 170);
    assert_eq!(m.cumulative.accepted, 34);
    assert_eq!(m.unreachable, vec!["eu-2".to_owned()]);
    assert_eq!(
        m.nodes.iter().map(|n| n.reachable).collect::<Vec<_>>(),
        vec![true, false, true]
    );
    assert_eq!(m.nodes[1].error.as_deref(), Some("no answer within 2s"));
    let order: Vec<(&str, &str)> = m
        .tenants
        .iter()
        .map(|t| (t.node.as_str(), t.tenant.id.as_str()))
        .collect();
    assert_eq!(
        order,
        vec![("eu-3", "c"), ("eu-1", "a"), ("eu-3", "a"), ("eu-1", "b")]
    );
    assert!(m.tenants[3].paused && !m.tenants[0].paused);
    // The same rows in node order without a sort.
    let m = merge_tenants(&answers, None);
    assert_eq!(m.tenants[0].node, "eu-1");
    assert_eq!(m.tenants[3].tenant.id, "c");
}

#[test]
fn an_unreachable_node_keeps_its_last_known_figures_and_rates_need_two_readings() {
    let fleet =
        parse("[[nodes]]\nname=\"eu-1\"\nsocket=\"a\"\n[[nodes]]\nname=\"eu-2\"\nsocket=\"b\"\n")
            .unwrap();
    let mut v = FleetView::new(&fleet);
    assert!(v.nodes.iter().all(|(.., s)| *s == NodeStatus::Unknown));
    v.apply(
        vec![
            answer("eu-1", Ok(figures("eu-1", &[("a", 5, 0)]))),
            answer("eu-2", Ok(figures("eu-2", &[("a", 1, 0)]))),
        ],
        1_000,
    );
    assert_eq!(FleetView::rates(&v.nodes[0].2), None);
    assert_eq!(v.totals(), (figures("x", &[("a", 6, 0)]).stats.node, 2));
    v.apply(
        vec![
            answer("eu-1", Ok(figures("eu-1", &[("a", 7, 0)]))),
            answer("eu-2", Err("connection refused".into())),
        ],
        3_000,
    );
    let r = FleetView::rates(&v.nodes[0].2).unwrap();
    assert_eq!(r.accepted, 2.0, "(14 - 10) accepted in 2 s");
    let NodeStatus::Unreachable { error, last_known } = &v.nodes[1].2 else {
        panic!("{:?}", v.nodes[1].2)
    };
    assert_eq!(error, "connection refused");
    assert_eq!(last_known.as_ref().map(|(_, at)| *at), Some(1_000));
    // Totals are the answering nodes' only; the rows keep the last-known
    // ones, marked as not current.
    assert_eq!(v.totals().1, 1);
    assert_eq!(v.totals().0.pending, 7);
    let rows = v.tenant_rows();
    assert_eq!(
        rows.iter()
            .map(|(n, cur, t, _)| (*n, *cur, t.counters.pending))
            .collect::<Vec<_>>(),
        vec![("eu-1", true, 7), ("eu-2", false, 1)]
    );
    assert_eq!(v.holders("a"), vec!["eu-1".to_owned(), "eu-2".to_owned()]);
    // Still down at the next survey: the same last-known figures.
    v.apply(vec![answer("eu-2", Err("still down".into()))], 5_000);
    assert!(matches!(
        &v.nodes[1].2,
        NodeStatus::Unreachable {
            last_known: Some((_, 1_000)),
            ..
        }
    ));
}

#[test]
fn a_node_that_never_answers_costs_the_deadline_and_no_more() {
    let dir = tempfile::tempdir().unwrap();
    // A socket that accepts (the kernel's backlog) and never answers.
    let hung = dir.path().join("hung.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&hung).unwrap();
    let text = format!(
        "timeout = \"300ms\"\n[[nodes]]\nname=\"hung\"\nsocket={:?}\n[[nodes]]\nname=\"gone\"\nsocket={:?}\n",
        hung.display().to_string(),
        dir.path().join("missing.sock").display().to_string()
    );
    let fleet = Fleet::parse(&dir.path().join("f.toml"), &text, dir.path()).unwrap();
    let t0 = Instant::now();
    let answers = ask_all(&fleet, |op| op.node());
    let took = t0.elapsed();
    assert!(took < Duration::from_millis(1_500), "{took:?}");
    assert!(took >= Duration::from_millis(250), "{took:?}");
    let errs: Vec<String> = answers
        .iter()
        .map(|a| a.result.as_ref().err().cloned().unwrap_or_default())
        .collect();
    assert!(
        errs[0].contains("did not answer within") || errs[0].contains("no answer within"),
        "{errs:?}"
    );
    assert!(errs[1].contains("cannot connect"), "{errs:?}");
    assert!(
        answers[1].took < Duration::from_millis(250),
        "a refused connection is quick"
    );
}
