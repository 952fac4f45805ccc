//! Unit tests of `reload`.

use super::*;

const BASE: &str = "[store]\npath = \"store\"\n[http]\nlisten = \"127.0.0.1:0\"\n";

fn settings(rest: &str) -> Settings {
    let text = format!("{BASE}{rest}");
    Settings::parse(&text, Path::new("/etc/ankusa.toml"), Path::new("/var/lib"))
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn sinks(list: &[(&str, &str, &str)]) -> String {
    list.iter()
        .map(|(name, url, extra)| {
            format!("[[sources.sinks]]\nname = \"{name}\"\nurl = \"{url}\"\n{extra}\n")
        })
        .collect()
}

fn shop(extra: &str, list: &[(&str, &str, &str)]) -> String {
    format!(
        "[[sources]]\nid = \"shop\"\ntenant = \"t\"\n{extra}\n{}",
        sinks(list)
    )
}

/// A reload of `old` (as running, with these rows owed by source and
/// position) to `new`, nothing admitted before the running generation in
/// flight.
fn reload(
    old: &Settings,
    new: &Settings,
    owed: impl Fn(&str, u16) -> i64,
) -> Result<Vec<ConfigChange>, ReloadError> {
    reload_at(1, old, new, owed)
}

/// [`reload`] to generation `generation`, from the one before it.
fn reload_at(
    generation: u64,
    old: &Settings,
    new: &Settings,
    owed: impl Fn(&str, u16) -> i64,
) -> Result<Vec<ConfigChange>, ReloadError> {
    let mut new = new.clone();
    let previous = crate::slots::of_settings(old, &[]);
    aligned_plan(
        old,
        &mut new,
        &previous,
        generation,
        &mut |s: &ankusa_store::sinks::SinkRef| Ok(owed(&s.source, s.sink)),
        generation - 1,
    )
    .map(|(c, _)| c)
}

fn nothing(_: &str, _: u16) -> i64 {
    0
}

fn refused(r: Result<Vec<ConfigChange>, ReloadError>) -> Vec<String> {
    match r {
        Err(ReloadError::Refused(why)) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

const A: (&str, &str, &str) = ("a", "http://127.0.0.1:9001/a", "");
const B: (&str, &str, &str) = ("b", "http://127.0.0.1:9002/b", "");
const C: (&str, &str, &str) = ("c", "http://127.0.0.1:9003/c", "");

#[test]
fn the_same_file_changes_nothing() {
    let s = settings(&shop("", &[A, B]));
    assert_eq!(plan(&s, &s).unwrap(), vec![]);
}

#[test]
fn a_sink_added_at_the_end_is_an_addition() {
    let old = settings(&shop("", &[A]));
    let new = settings(&shop("", &[A, B]));
    let c = plan(&old, &new).unwrap();
    assert_eq!(
        c,
        vec![change(
            "added",
            "sink",
            "shop/b".into(),
            vec!["http://127.0.0.1:9002".into()]
        )]
    );
}

#[test]
fn a_sink_keeps_its_position() {
    let old = settings(&shop("", &[A, B]));
    // Listed in another order: each keeps its place, and the report says so.
    let swapped = settings(&shop("", &[B, A]));
    let c = reload(&old, &swapped, nothing).unwrap();
    assert_eq!(
        c,
        vec![change(
            "changed",
            "source",
            "shop".into(),
            vec!["sinks listed in another order: each keeps its position".into()]
        )]
    );
    // Another endpoint where a sink was: a new sink at a new position, and
    // the old one leaves, which it may not do before it was retired.
    let replaced = settings(&shop("", &[A, C]));
    let why = refused(reload(&old, &replaced, nothing));
    assert!(
        why[0].contains("sink shop/b is gone from the file but was not retired"),
        "{why:?}"
    );
    // The same endpoint under another name is a rename.
    let renamed = settings(&shop("", &[A, ("billing", B.1, "")]));
    let c = reload(&old, &renamed, nothing).unwrap();
    assert_eq!(c[0].details, vec!["renamed to shop/billing".to_owned()]);
}

#[test]
fn a_sink_with_rows_owed_cannot_be_dropped_but_can_be_retired() {
    let old = settings(&shop("", &[A, B]));
    let dropped = settings(&shop("", &[A]));
    let waits = |_: &str, sink: u16| if sink == 1 { 42 } else { 0 };
    let why = refused(reload(&old, &dropped, waits));
    assert!(
        why[0].contains("sink shop/b is gone from the file but 42 rows are owed to it"),
        "{why:?}"
    );
    let retired = settings(&shop("", &[A, (B.0, B.1, "retired = true")]));
    let c = reload(&old, &retired, waits).unwrap();
    assert_eq!(c[0].details, vec!["retired: takes no new hooks".to_owned()]);
    // Once nothing is owed, and it was retired, it goes: its position
    // becomes a tombstone.
    let mut running = retired.clone();
    crate::slots::align_all(&mut running, &crate::slots::of_settings(&old, &[]), 1).unwrap();
    let c = reload_at(2, &running, &dropped, nothing).unwrap();
    assert_eq!(c, vec![change("removed", "sink", "shop/b".into(), vec![])]);
    // A sink added next takes position 2, not 1.
    let mut after = dropped.clone();
    crate::slots::align_all(&mut after, &crate::slots::of_settings(&running, &[]), 2).unwrap();
    let c = reload_at(3, &after, &settings(&shop("", &[A, C])), nothing).unwrap();
    assert_eq!(c[0].name, "shop/c");
    assert_eq!(c[0].kind, "added");
}

#[test]
fn a_source_with_rows_owed_cannot_be_dropped() {
    let two = format!(
        "{}[[sources]]\nid = \"blog\"\ntenant = \"b\"\n{}",
        shop("", &[A]),
        sinks(&[(C.0, C.1, "retired = true")])
    );
    let old = settings(&two);
    let new = settings(&shop("", &[A]));
    let waits = |source: &str, _: u16| if source == "blog" { 7 } else { 0 };
    let why = refused(reload(&old, &new, waits));
    assert!(
        why[0].contains("sink blog/c is gone from the file but 7 rows are owed to it"),
        "{why:?}"
    );
    let c = reload(&old, &new, nothing).unwrap();
    assert_eq!(c, vec![change("removed", "source", "blog".into(), vec![])]);
    let back = plan(&new, &old).unwrap();
    assert_eq!(back[0].kind, "added");
    assert_eq!(
        back[0].details,
        vec!["sink blog/c (http://127.0.0.1:9003)".to_owned()]
    );
}

#[test]
fn what_needs_a_restart_is_refused_by_name() {
    let old = settings(&shop("", &[A]));
    let text = format!(
        "[store]\npath = \"elsewhere\"\n[http]\nlisten = \"127.0.0.1:8080\"\n[dispatch]\nper_sink = 3\n{}",
        shop("", &[A])
    );
    let new = Settings::parse(&text, Path::new("/etc/ankusa.toml"), Path::new("/var/lib")).unwrap();
    let why = refused(plan(&old, &new));
    let all = why.join("\n");
    for key in ["store.path", "http.listen", "[dispatch]"] {
        assert!(all.contains(&format!("{key} changed")), "{key}: {all}");
    }
    assert!(why.iter().all(|w| w.ends_with("restart needed")), "{all}");

    // The three the writer reads once are named each on its own.
    for (table, key, name) in [
        ("writer", "linger = \"9ms\"", "[writer] changed"),
        ("ingest", "dedupe_ttl = \"2h\"", "[ingest] changed"),
        ("tenants", "max = 77", "tenants.max changed (1000000 -> 77)"),
    ] {
        let new = settings(&format!("[{table}]\n{key}\n{}", shop("", &[A])));
        let why = refused(plan(&old, &new));
        assert!(
            why.len() == 1 && why[0].starts_with(name),
            "{table}: {why:?}"
        );
    }
}

#[test]
fn secrets_are_named_never_shown() {
    let old = settings(&shop(
        "token = \"old-token-1234\"\nsigning_secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"",
        &[A],
    ));
    let new = settings(&shop(
        "token = \"new-token-5678\"\nweight = 3",
        &[(A.0, A.1, "timeout = \"9s\"")],
    ));
    let c = plan(&old, &new).unwrap();
    let text = format!("{c:?}");
    assert!(!text.contains("token-"), "{text}");
    assert!(!text.contains("whsec_"), "{text}");
    assert_eq!(
        c[0].details,
        vec!["token changed", "signing_secret removed", "weight 1 -> 3"]
    );
    assert_eq!(c[1].details, vec!["timeout 10s -> 9s"]);
}

#[test]
fn admin_tokens_are_compared_by_name() {
    let old = settings(&format!(
        "[[admin.tokens]]\nname = \"ops\"\ntoken = \"aaaaaaaaaaaaaaaaaaaaaaaa\"\n{}",
        shop("", &[A])
    ));
    let new = settings(&format!(
        "[[admin.tokens]]\nname = \"ops\"\ntoken = \"bbbbbbbbbbbbbbbbbbbbbbbb\"\n[[admin.tokens]]\nname = \"ci\"\ntoken = \"cccccccccccccccccccccccc\"\n{}",
        shop("", &[A])
    ));
    let c = plan(&old, &new).unwrap();
    assert_eq!(
        c,
        vec![
            change("added", "admin token", "ci".into(), vec![]),
            change(
                "changed",
                "admin token",
                "ops".into(),
                vec!["token changed".into()]
            ),
        ]
    );
}

#[test]
fn a_retired_sink_takes_no_new_hooks() {
    let s = settings(&shop("", &[A, (B.0, B.1, "retired = true"), C]));
    let set = s.sources[0].ingest_sinks();
    assert_eq!(set.iter().collect::<Vec<_>>(), vec![0, 2]);
}

#[test]
fn a_generation_is_in_flight_while_anything_admitted_under_it_is() {
    let s = settings(&shop("", &[A]));
    let live = Live::new(&s);
    // A request admitted under generation 0 keeps its source.
    let admitted = live.current().source("shop").cloned().unwrap();
    live.swap(Routes::new(1, &s));
    live.swap(Routes::new(2, &s));
    assert_eq!(live.oldest_in_flight(), 0);
    drop(admitted);
    assert_eq!(live.oldest_in_flight(), 2, "nothing older is held");
    // A delivery attempt holds its sink's source too.
    let attempt = live.current().sink("shop", 0).unwrap();
    live.swap(Routes::new(3, &s));
    assert_eq!(live.oldest_in_flight(), 2);
    drop(attempt);
    assert_eq!(live.oldest_in_flight(), 3);
}

#[test]
fn a_tombstone_is_no_sink() {
    let s = settings(&shop("", &[A, B]));
    let mut aligned = settings(&shop("", &[A, (B.0, B.1, "retired = true")]));
    crate::slots::align_all(&mut aligned, &crate::slots::of_settings(&s, &[]), 1).unwrap();
    let mut dropped = settings(&shop("", &[A]));
    crate::slots::align_all(&mut dropped, &crate::slots::of_settings(&aligned, &[]), 2).unwrap();
    let routes = Routes::new(2, &dropped);
    assert!(routes.sink("shop", 0).is_some());
    assert!(
        routes.sink("shop", 1).is_none(),
        "nothing is delivered to a tombstone"
    );
    assert_eq!(dropped.sources[0].configured(), vec![0]);
}
