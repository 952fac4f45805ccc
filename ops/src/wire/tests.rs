//! The mirrors write what the store types hold and read it back, refuse
//! what a request body must not carry, and take a field an older node
//! leaves out as its default.

use ankusa_store::pauses::{Origin, Pause, Scope};
use ankusa_store::policy::{Policy, Rate, SinkLimits};
use ankusa_store::sinks::SinkRef;
use ankusa_store::tenants::TenantInfo;
use ankusa_store::{Counters, Totals};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Holder {
    #[serde(with = "TenantInfoJson")]
    tenant: TenantInfo,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "Opt::<PolicyJson>"
    )]
    policy: Option<Policy>,
    #[serde(default, with = "Seq::<PauseJson>")]
    pauses: Vec<Pause>,
}

fn rate() -> impl Strategy<Value = Option<Rate>> {
    prop_oneof![
        Just(None),
        (1u64..100_000).prop_map(|n| Some(Rate::from_milli(n * 1000))),
        (1u64..100_000).prop_map(|n| Some(Rate::from_milli(n * 1000 / 60))),
    ]
}

fn holder() -> impl Strategy<Value = Holder> {
    let counters = proptest::array::uniform6(any::<i64>());
    let totals = proptest::array::uniform5(any::<u64>());
    let policy = proptest::option::of((
        proptest::option::of(1u32..100),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
        rate(),
    ));
    let pause = (
        proptest::option::of("[a-z]{1,8}"),
        proptest::option::of(("[a-z]{1,8}", any::<u16>())),
        any::<u64>(),
        any::<bool>(),
        "[a-z]{0,8}",
    );
    (
        any::<u32>(),
        "[a-z0-9-]{1,12}",
        counters,
        totals,
        policy,
        proptest::collection::vec(pause, 0..3),
    )
        .prop_map(|(ord, id, c, t, policy, pauses)| Holder {
            tenant: TenantInfo {
                ord,
                id,
                counters: Counters {
                    pending: c[0],
                    scheduled: c[1],
                    inflight: c[2],
                    dead: c[3],
                    bytes: c[4],
                    archive_pending: c[5],
                },
                totals: Totals {
                    accepted: t[0],
                    delivered: t[1],
                    retried: t[2],
                    dead_lettered: t[3],
                    unrouted: t[4],
                },
            },
            policy: policy.map(|(weight, share, cap, rate)| Policy {
                weight,
                share,
                cap,
                rate,
            }),
            pauses: pauses
                .into_iter()
                .map(|(tenant, sink, at, breaker, by)| Pause {
                    scope: Scope {
                        tenant,
                        sink: sink.map(|(s, i)| SinkRef::new(s, i)),
                    },
                    at,
                    origin: if breaker {
                        Origin::Breaker
                    } else {
                        Origin::Operator
                    },
                    by,
                })
                .collect(),
        })
}

proptest! {
    #[test]
    fn what_a_mirror_writes_it_reads_back(h in holder()) {
        let text = serde_json::to_string(&h).unwrap();
        let back: Holder = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(back, h);
    }
}

#[test]
fn the_json_has_the_field_names_of_the_wire() {
    let p = Pause {
        scope: Scope::sink("shop", 2),
        at: 7,
        origin: Origin::Breaker,
        by: "breaker".into(),
    };
    let v = serde_json::to_value(Via::<PauseJson, _>::new(&p)).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "scope": {"sink": {"source": "shop", "sink": 2}},
            "at": 7,
            "origin": "breaker",
            "by": "breaker",
        })
    );
    let l = SinkLimits {
        max_in_flight: Some(4),
        rate: Some("90/m".parse().unwrap()),
    };
    let v = serde_json::to_value(Via::<SinkLimitsJson, _>::new(&l)).unwrap();
    assert_eq!(v, serde_json::json!({"max_in_flight": 4, "rate": "90/m"}));
}

#[test]
fn a_policy_body_with_a_field_it_does_not_know_is_refused() {
    let bad = serde_json::from_str::<Own<PolicyJson, Policy>>(r#"{"wieght": 3}"#);
    assert!(bad.is_err(), "an unknown field must be refused");
    let bad = serde_json::from_str::<Own<SinkLimitsJson, SinkLimits>>(r#"{"rate": "fast"}"#);
    assert!(bad.is_err(), "a rate that is not one must be refused");
    let good = serde_json::from_str::<Own<PolicyJson, Policy>>(r#"{"weight": 3}"#).unwrap();
    assert_eq!(good.into_inner().weight, Some(3));
}

#[test]
fn fields_an_older_node_leaves_out_read_as_their_defaults() {
    let h: Holder = serde_json::from_str(
        r#"{"tenant": {"ord": 1, "id": "a", "counters":
            {"pending": 1, "scheduled": 0, "inflight": 0, "dead": 0, "bytes": 0,
             "archive_pending": 0}}}"#,
    )
    .unwrap();
    assert_eq!(h.tenant.totals, Totals::default());
    assert_eq!(h.policy, None);
    assert!(h.pauses.is_empty());
}
