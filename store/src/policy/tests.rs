//! Unit tests of `policy`.

use super::*;
use proptest::prelude::*;

/// Issue 47: a rate decoded from a stored row may be any u64, and its
/// text multiplied it by 60 unchecked (a panic with overflow checks on,
/// a wrong number without).
#[test]
fn any_stored_rate_displays_without_overflow() {
    let huge = Rate::from_milli(u64::MAX - 1);
    assert_eq!(huge.to_string(), format!("{}/s", huge.per_second()));
    assert!(Rate::from_milli(u64::MAX / 60 + 7)
        .to_string()
        .ends_with("/s"));
    assert_eq!(Rate::from_milli(50).to_string(), "3/m");
    assert_eq!(Rate::from_milli(2000).to_string(), "2/s");
}

fn policy() -> impl Strategy<Value = Policy> {
    (
        proptest::option::of(1..=MAX_WEIGHT),
        proptest::option::of(1..=1000u32),
        proptest::option::of(1000..=MAX_SLOTS),
        proptest::option::of(MIN_RATE_MILLI..=MAX_RATE_MILLI),
    )
        .prop_map(|(weight, share, cap, rate)| Policy {
            weight,
            share,
            cap,
            rate: rate.map(Rate::from_milli),
        })
}

proptest! {
    #[test]
    fn a_policy_decodes_to_what_was_encoded(p in policy(), at in any::<u64>(), by in "[a-z]{0,12}") {
        prop_assume!(!p.is_empty());
        let (q, a, b) = Policy::decode(&p.encode(at, &by)).unwrap();
        prop_assert_eq!((q, a, b), (p, at, by));
    }

    #[test]
    fn a_rate_reads_back_from_its_text(milli in MIN_RATE_MILLI..=MAX_RATE_MILLI) {
        let r = Rate::from_milli(milli);
        let back: Rate = r.to_string().parse().unwrap();
        // Text in /s with a fraction may round at the thousandth.
        prop_assert!(back.milli().abs_diff(milli) <= 1, "{} -> {}", r, back.milli());
    }
}

#[test]
fn rates_parse_in_their_units_and_bad_ones_are_refused() {
    let ms = |s: &str| s.parse::<Rate>().map(Rate::milli);
    assert_eq!(ms("50/s"), Ok(50_000));
    assert_eq!(ms("50"), Ok(50_000));
    assert_eq!(ms("2.5/s"), Ok(2_500));
    assert_eq!(ms("30/m"), Ok(500));
    assert_eq!(ms("3600/h"), Ok(1_000));
    for bad in ["", "0/s", "-1/s", "x/s", "5/d", "nan/s", "inf", "1/h/s"] {
        assert!(bad.parse::<Rate>().is_err(), "{bad:?} parsed");
    }
    assert_eq!(Rate::from_milli(500).to_string(), "30/m");
    assert_eq!(Rate::from_milli(50_000).to_string(), "50/s");
    // The resolution docs/configuration.md states: a thousandth a
    // second, so an hourly rate rounds and one an hour is too low.
    assert_eq!(ms("10/h"), Ok(3));
    assert_eq!(ms("1/m"), Ok(17));
    assert_eq!(ms("3.6/h"), Ok(1));
    let low = "1/h".parse::<Rate>().unwrap_err().to_string();
    assert!(low.contains("0.001/s") && low.contains("3.6/h"), "{low}");
}

#[test]
fn out_of_range_and_contradictory_policies_are_refused_by_field() {
    let bad = [
        (
            Policy {
                weight: Some(0),
                ..Policy::default()
            },
            "weight",
        ),
        (
            Policy {
                weight: Some(1001),
                ..Policy::default()
            },
            "weight",
        ),
        (
            Policy {
                cap: Some(0),
                ..Policy::default()
            },
            "cap",
        ),
        (
            Policy {
                share: Some(9),
                cap: Some(4),
                ..Policy::default()
            },
            "share 9 above cap 4",
        ),
    ];
    for (p, why) in bad {
        let e = p.check().unwrap_err();
        assert!(e.contains(why), "{e}");
    }
    assert!(Policy {
        share: Some(4),
        cap: Some(4),
        ..Policy::default()
    }
    .check()
    .is_ok());
}

#[test]
fn a_change_moves_the_version_and_the_dispatchers_view() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create_or_open(&dir.path().join("s")).unwrap();
    let alloc = tenants::TenantAllocator::load(&store, 10).unwrap();
    let mut b = Batch::new();
    let res = alloc.resolve(&store, ["acme"], &mut b).unwrap();
    let ord = res.ord("acme", 10).unwrap();
    store.commit(b, true).unwrap();
    assert_eq!(version(&store).unwrap(), 0);
    let p = Policy {
        weight: Some(4),
        rate: Some(Rate::from_milli(50_000)),
        ..Policy::default()
    };
    let mut b = Batch::new();
    let t = TenantPolicy {
        tenant: "acme".into(),
        policy: p,
        at: 7,
        by: "op".into(),
    };
    put_tenant(&store, &mut b, &t).unwrap();
    let s = StoredSinkLimits {
        sink: SinkRef {
            source: "shop".into(),
            sink: 1,
        },
        limits: SinkLimits {
            max_in_flight: Some(3),
            rate: None,
        },
        at: 8,
        by: "op".into(),
    };
    put_sink(&store, &mut b, &s).unwrap();
    store.commit(b, true).unwrap();
    assert_eq!(version(&store).unwrap(), 1, "one batch, one step");
    let seen = Policies::load(&store).unwrap();
    assert_eq!(seen.version, 1);
    assert_eq!(seen.tenant(ord), Some(&p));
    assert_eq!(seen.sinks.get(&s.sink), Some(&s.limits));
    assert_eq!(tenant(&store, "acme").unwrap(), Some(t.clone()));
    // An empty policy deletes the row and moves the version again.
    let mut b = Batch::new();
    put_tenant(
        &store,
        &mut b,
        &TenantPolicy {
            policy: Policy::default(),
            ..t
        },
    )
    .unwrap();
    store.commit(b, true).unwrap();
    assert_eq!(version(&store).unwrap(), 2);
    assert_eq!(tenant(&store, "acme").unwrap(), None);
    assert_eq!(count(&store).unwrap(), 1);
}

/// Issue 47: the dispatcher reads what changed, not the table. Over
/// random sets and clears of tenant policies and sink limits (several
/// to a batch at times), read back now and then, the view brought up
/// to date from the log equals the table read whole, and the stored
/// count equals the rows.
#[derive(Debug, Clone)]
enum Op {
    Tenant(usize, Option<u32>),
    Sink(u16, Option<u32>),
    Read,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..6usize, proptest::option::of(1..5u32)).prop_map(|(t, w)| Op::Tenant(t, w)),
        (0..4u16, proptest::option::of(1..5u32)).prop_map(|(k, n)| Op::Sink(k, n)),
        Just(Op::Read),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn the_view_from_the_log_equals_the_table(
        batches in proptest::collection::vec(proptest::collection::vec(op(), 1..4), 1..40),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create_or_open(&dir.path().join("s")).unwrap();
        let names: Vec<String> = (0..6).map(|i| format!("t{i}")).collect();
        let alloc = tenants::TenantAllocator::load(&store, 10).unwrap();
        let mut b = Batch::new();
        alloc.resolve(&store, names.iter().map(String::as_str), &mut b).unwrap();
        store.commit(b, true).unwrap();
        let mut view = Policies::load(&store).unwrap();
        for ops in &batches {
            let mut b = Batch::new();
            for op in ops {
                match op {
                    Op::Tenant(t, w) => put_tenant(&store, &mut b, &TenantPolicy {
                        tenant: names[*t].clone(),
                        policy: Policy { weight: *w, ..Policy::default() },
                        at: 1,
                        by: "op".into(),
                    }).unwrap(),
                    Op::Sink(k, n) => put_sink(&store, &mut b, &StoredSinkLimits {
                        sink: SinkRef { source: "s".into(), sink: *k },
                        limits: SinkLimits { max_in_flight: *n, rate: None },
                        at: 1,
                        by: "op".into(),
                    }).unwrap(),
                    Op::Read => {}
                }
            }
            store.commit(b, true).unwrap();
            let (t, s) = list(&store).unwrap();
            prop_assert_eq!(count(&store).unwrap(), t.len() + s.len());
            if ops.iter().any(|o| matches!(o, Op::Read)) {
                view.update(&store).unwrap();
                prop_assert_eq!(&view, &Policies::load(&store).unwrap());
            }
        }
        view.update(&store).unwrap();
        prop_assert_eq!(&view, &Policies::load(&store).unwrap());
    }
}

#[test]
fn a_view_too_far_behind_reads_the_table_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create_or_open(&dir.path().join("s")).unwrap();
    let mut view = Policies::load(&store).unwrap();
    for i in 0..(LOG_KEEP + 5) {
        let mut b = Batch::new();
        put_sink(
            &store,
            &mut b,
            &StoredSinkLimits {
                sink: SinkRef {
                    source: "s".into(),
                    sink: (i % 3) as u16,
                },
                limits: SinkLimits {
                    max_in_flight: Some(1 + (i % 7) as u32),
                    rate: None,
                },
                at: 1,
                by: "op".into(),
            },
        )
        .unwrap();
        store.commit(b, true).unwrap();
    }
    assert!(changed_since(&store, 0, LOG_KEEP + 5).unwrap().is_none());
    view.update(&store).unwrap();
    assert_eq!(view, Policies::load(&store).unwrap());
    assert_eq!(count(&store).unwrap(), 3);
}
