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

fn nothing_waits() -> impl FnMut(&str, u16) -> Result<i64, ankusa_store::StoreError> {
    |_, _| Ok(0)
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
    assert_eq!(plan(&s, &s, &mut nothing_waits()).unwrap(), vec![]);
}

#[test]
fn a_sink_added_at_the_end_is_an_addition() {
    let old = settings(&shop("", &[A]));
    let new = settings(&shop("", &[A, B]));
    let c = plan(&old, &new, &mut nothing_waits()).unwrap();
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
    let swapped = settings(&shop("", &[B, A]));
    let why = refused(plan(&old, &swapped, &mut nothing_waits()));
    assert!(
        why[0].contains("sink shop/a moved from position 0 to 1"),
        "{why:?}"
    );
    // Another endpoint in a sink's place: its rows would go there.
    let replaced = settings(&shop("", &[A, C]));
    let why = refused(plan(&old, &replaced, &mut nothing_waits()));
    assert!(
        why[0].contains("sink shop/c takes position 1, which is shop/b's"),
        "{why:?}"
    );
    // The same endpoint under another name is a rename.
    let renamed = settings(&shop("", &[A, ("billing", B.1, "")]));
    let c = plan(&old, &renamed, &mut nothing_waits()).unwrap();
    assert_eq!(c[0].details, vec!["renamed to shop/billing".to_owned()]);
}

#[test]
fn a_sink_with_rows_waiting_cannot_be_dropped_but_can_be_retired() {
    let old = settings(&shop("", &[A, B]));
    let dropped = settings(&shop("", &[A]));
    let mut waits =
        |_: &str, sink: u16| Ok::<_, ankusa_store::StoreError>(if sink == 1 { 42 } else { 0 });
    let why = refused(plan(&old, &dropped, &mut waits));
    assert!(
        why[0].contains("sink shop/b is gone from the file but 42 rows wait for it"),
        "{why:?}"
    );
    let retired = settings(&shop("", &[A, (B.0, B.1, "retired = true")]));
    let c = plan(&old, &retired, &mut waits).unwrap();
    assert_eq!(c[0].details, vec!["retired: takes no new hooks".to_owned()]);
    // Once nothing waits, it goes.
    let c = plan(&retired, &dropped, &mut nothing_waits()).unwrap();
    assert_eq!(c, vec![change("removed", "sink", "shop/b".into(), vec![])]);
}

#[test]
fn a_source_with_rows_waiting_cannot_be_dropped() {
    let two = format!(
        "{}[[sources]]\nid = \"blog\"\ntenant = \"b\"\n{}",
        shop("", &[A]),
        sinks(&[C])
    );
    let old = settings(&two);
    let new = settings(&shop("", &[A]));
    let mut waits = |source: &str, _: u16| {
        Ok::<_, ankusa_store::StoreError>(if source == "blog" { 7 } else { 0 })
    };
    let why = refused(plan(&old, &new, &mut waits));
    assert!(
        why[0].contains("source blog is gone from the file but 7 rows wait"),
        "{why:?}"
    );
    let c = plan(&old, &new, &mut nothing_waits()).unwrap();
    assert_eq!(c, vec![change("removed", "source", "blog".into(), vec![])]);
    let back = plan(&new, &old, &mut nothing_waits()).unwrap();
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
    let why = refused(plan(&old, &new, &mut nothing_waits()));
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
        let why = refused(plan(&old, &new, &mut nothing_waits()));
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
    let c = plan(&old, &new, &mut nothing_waits()).unwrap();
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
    let c = plan(&old, &new, &mut nothing_waits()).unwrap();
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

/// One edit an operator might make to a source's sinks.
#[derive(Debug, Clone)]
enum Edit {
    Append,
    RetireLast,
    DropLast,
    Swap(usize, usize),
    Rename(usize),
    Repoint(usize),
    DropSource,
    AddSource,
}

fn edit_strategy() -> impl proptest::strategy::Strategy<Value = Edit> {
    use proptest::prelude::*;
    prop_oneof![
        Just(Edit::Append),
        Just(Edit::RetireLast),
        Just(Edit::DropLast),
        (0..4usize, 0..4usize).prop_map(|(a, b)| Edit::Swap(a, b)),
        (0..4usize).prop_map(Edit::Rename),
        (0..4usize).prop_map(Edit::Repoint),
        Just(Edit::DropSource),
        Just(Edit::AddSource),
    ]
}

/// A file of sources, each a list of (name, url, retired).
type Model = Vec<(String, Vec<(String, String, bool)>)>;

fn render(m: &Model) -> String {
    let mut out = String::new();
    for (id, sinks) in m {
        out.push_str(&format!("[[sources]]\nid = \"{id}\"\n"));
        for (name, url, retired) in sinks {
            out.push_str(&format!(
                "[[sources.sinks]]\nname = \"{name}\"\nurl = \"{url}\"\nretired = {retired}\n"
            ));
        }
    }
    out
}

fn apply(m: &mut Model, e: &Edit, n: &mut usize) {
    *n += 1;
    let fresh = *n;
    match e {
        Edit::AddSource => m.push((
            format!("s{fresh}"),
            vec![(format!("k{fresh}"), format!("http://h/{fresh}"), false)],
        )),
        Edit::DropSource if m.len() > 1 => {
            m.pop();
        }
        Edit::DropSource => {}
        _ => {
            let Some((_, sinks)) = m.first_mut() else {
                return;
            };
            match *e {
                Edit::Append => {
                    sinks.push((format!("k{fresh}"), format!("http://h/{fresh}"), false))
                }
                Edit::RetireLast => {
                    if let Some(last) = sinks.last_mut() {
                        last.2 = true;
                    }
                }
                Edit::DropLast if sinks.len() > 1 => {
                    sinks.pop();
                }
                Edit::Swap(a, b) if a < sinks.len() && b < sinks.len() => sinks.swap(a, b),
                Edit::Rename(i) if i < sinks.len() => sinks[i].0 = format!("k{fresh}"),
                Edit::Repoint(i) if i < sinks.len() => sinks[i].1 = format!("http://h/{fresh}"),
                _ => {}
            }
        }
    }
}

proptest::proptest! {
    /// Whatever the edits, a reload that is taken leaves every row that
    /// waits with the sink it was accepted for: same source, and at its
    /// position a sink of the same name or the same URL. Rows are never
    /// orphaned or sent elsewhere; only who takes new hooks changes.
    #[test]
    fn a_taken_reload_never_moves_a_waiting_row(
        edits in proptest::collection::vec(edit_strategy(), 1..12),
        owed in proptest::collection::vec(0i64..3, 8),
    ) {
        let mut model: Model = vec![(
            "shop".into(),
            vec![("k0".into(), "http://h/0".into(), false)],
        )];
        let mut n = 0;
        let mut applied = settings(&render(&model));
        // Rows waiting: by source and position, fixed for the run.
        let waits = |source: &str, sink: u16| {
            let h = source.bytes().map(usize::from).sum::<usize>() + usize::from(sink);
            Ok::<_, ankusa_store::StoreError>(owed[h % owed.len()])
        };
        for e in &edits {
            apply(&mut model, e, &mut n);
            let mut next = settings(&render(&model));
            crate::slots::align_all(&mut next, |id| crate::slots::of_settings(&applied, id));
            let mut w = waits;
            match plan(&applied, &next, &mut w) {
                Ok(_) => {
                    for a in &applied.sources {
                        for (i, k) in a.sinks.iter().enumerate() {
                            let pos = u16::try_from(i).unwrap();
                            if waits(&a.id, pos).unwrap() == 0 {
                                continue;
                            }
                            let b = next.sources.iter().find(|s| s.id == a.id);
                            let kept = b.and_then(|b| b.sinks.get(i));
                            proptest::prop_assert!(
                                kept.is_some_and(|x| x.name == k.name || x.url == k.url),
                                "{}/{:?} at {i} owes rows and lost its place after {e:?}",
                                a.id, k.name
                            );
                        }
                    }
                    applied = next;
                }
                // Refused: the operator's file stays what the daemon runs.
                Err(ReloadError::Refused(_)) => {
                    model = applied
                        .sources
                        .iter()
                        .map(|s| {
                            (
                                s.id.clone(),
                                s.sinks
                                    .iter()
                                    .map(|k| (k.name.clone().unwrap_or_default(), k.url.clone(), k.retired))
                                    .collect(),
                            )
                        })
                        .collect();
                }
                Err(other) => proptest::prop_assert!(false, "{other}"),
            }
        }
    }
}
