//! The store commands, run as a user runs them: the real binary on real
//! stores.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use crate::common::raw_open;

fn ankusa(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ankusa"))
        .args(args)
        .env_remove("ANKUSA_STORE")
        .output()
        .expect("run ankusa")
}

fn fixture(dir: &Path, tenants: u32, rows: u64) -> String {
    let out = dir.join("store");
    let o = ankusa(&[
        "store",
        "fixture",
        "--format",
        "3",
        "--out",
        out.to_str().unwrap(),
        "--tenants",
        &tenants.to_string(),
        "--rows",
        &rows.to_string(),
        "--seed",
        "7",
    ]);
    assert!(
        o.status.success(),
        "fixture failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out.to_str().unwrap().to_owned()
}

#[derive(Default, Debug, PartialEq)]
struct Count {
    pending: i64,
    scheduled: i64,
    inflight: i64,
    dead: i64,
}

/// Counts index keys per tenant ordinal straight from the bytes, following
/// docs/storage.md rather than the store crate's decoders.
fn independent_count(path: &str) -> BTreeMap<u32, Count> {
    let db = raw_open(path);
    let cf = db.cf_handle("index").unwrap();
    let mut out: BTreeMap<u32, Count> = BTreeMap::new();
    for item in db.iterator_cf(cf, rocksdb::IteratorMode::Start) {
        let (k, v) = item.unwrap();
        let ord = |k: &[u8]| u32::from_be_bytes(k[1..5].try_into().unwrap());
        match k[0] {
            b'D' => {
                let c = out.entry(ord(&k)).or_default();
                if v[4] == 0 {
                    c.pending += 1
                } else {
                    c.scheduled += 1
                }
            }
            b'F' => out.entry(ord(&k)).or_default().inflight += 1,
            b'X' => out.entry(ord(&k)).or_default().dead += 1,
            _ => {}
        }
    }
    out
}

#[test]
fn a_fixture_passes_store_check_and_tenants_list_agrees_with_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = fixture(dir.path(), 40, 5_000);
    let o = ankusa(&["store", "check", "--store", &store]);
    assert!(
        o.status.success(),
        "check failed:\n{}",
        String::from_utf8_lossy(&o.stdout)
    );

    let o = ankusa(&[
        "tenants", "list", "--store", &store, "--json", "--limit", "1000",
    ]);
    assert!(o.status.success());
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let counted = independent_count(&store);
    let mut listed = BTreeMap::new();
    for t in list["tenants"].as_array().unwrap() {
        let c = &t["counters"];
        let count = Count {
            pending: c["pending"].as_i64().unwrap(),
            scheduled: c["scheduled"].as_i64().unwrap(),
            inflight: c["inflight"].as_i64().unwrap(),
            dead: c["dead"].as_i64().unwrap(),
        };
        if count != Count::default() {
            listed.insert(t["ord"].as_u64().unwrap() as u32, count);
        }
    }
    assert_eq!(listed.len(), 40, "every fixture tenant has rows");
    assert_eq!(listed, counted);

    // The fixture's special tenants are there.
    let o = ankusa(&["tenants", "show", "dead-only", "--store", &store, "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["counters"]["pending"], 0);
    assert!(v["counters"]["dead"].as_i64().unwrap() > 0);
    let o = ankusa(&["tenants", "show", "default", "--store", &store]);
    assert!(o.status.success());

    // Sorted by dead, largest first.
    let o = ankusa(&[
        "tenants", "list", "--store", &store, "--json", "--sort", "dead", "--limit", "3",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let dead_of = |v: &serde_json::Value| -> Vec<i64> {
        v["tenants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["counters"]["dead"].as_i64().unwrap())
            .collect()
    };
    let dead = dead_of(&v);
    assert_eq!(dead.len(), 3);
    assert!(dead.windows(2).all(|w| w[0] >= w[1]), "{dead:?}");
    // The next page continues the order without repeating a tenant.
    let cursor = v["next"].as_str().expect("a full page has a cursor");
    let o = ankusa(&[
        "tenants", "list", "--store", &store, "--json", "--sort", "dead", "--limit", "3",
        "--cursor", cursor,
    ]);
    let next: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let more = dead_of(&next);
    assert_eq!(more.len(), 3);
    assert!(dead[2] >= more[0], "{dead:?} then {more:?}");
    let ords = |v: &serde_json::Value| -> Vec<u64> {
        v["tenants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["ord"].as_u64().unwrap())
            .collect()
    };
    let (a, b) = (ords(&v), ords(&next));
    assert!(a.iter().all(|o| !b.contains(o)), "{a:?} {b:?}");

    let o = ankusa(&["store", "info", "--store", &store, "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["format"], 3);
    assert_eq!(v["tenants"], 40);
    let total: i64 = counted.values().map(|c| c.pending).sum();
    assert_eq!(v["node"]["pending"].as_i64().unwrap(), total);
    store_info_json_is_as_documented(&v);
}

/// `store info --json` has the keys docs/cli.md shows, each of them, and
/// no other (its JSON is written by `ankusa_ops::wire::StoreInfoJson`).
fn store_info_json_is_as_documented(v: &serde_json::Value) {
    let keys = crate::common::keys_of;
    let sorted = |k: &[&str]| -> Vec<String> {
        let mut k: Vec<String> = k.iter().map(|s| s.to_string()).collect();
        k.sort();
        k
    };
    let top = [
        "path",
        "mode",
        "format",
        "node",
        "totals",
        "tenants",
        "active",
        "oldest_due",
        "oldest_due_age_ms",
        "next_seq",
        "quarantined",
        "approx_keys",
    ];
    assert_eq!(keys(v), sorted(&top));
    let node = [
        "pending",
        "scheduled",
        "inflight",
        "dead",
        "bytes",
        "archive_pending",
    ];
    assert_eq!(keys(&v["node"]), sorted(&node));
    let totals = [
        "accepted",
        "delivered",
        "retried",
        "dead_lettered",
        "unrouted",
    ];
    assert_eq!(keys(&v["totals"]), sorted(&totals));
    let active = ["tenants", "markers_walked", "complete"];
    assert_eq!(keys(&v["active"]), sorted(&active));
    let oldest = ["ord", "at", "exact"];
    assert_eq!(keys(&v["oldest_due"]), sorted(&oldest), "{v}");

    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md")).unwrap();
    let start = doc.find("\"active\": { \"tenants\"").unwrap();
    let block = &doc[doc[..start].rfind("```json").unwrap()..];
    let block = &block[..block[7..].find("```").unwrap()];
    for k in top.iter().chain(&node).chain(&totals).chain(&active) {
        assert!(
            block.contains(&format!("\"{k}\":")),
            "docs/cli.md's `store info --json` example lacks {k:?}"
        );
    }
}

#[test]
fn a_tampered_counter_fails_store_check_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = fixture(dir.path(), 5, 300);
    {
        let db = raw_open(&store);
        let cf = db.cf_handle("counters").unwrap();
        let mut key = 3u32.to_be_bytes().to_vec();
        key.push(1);
        db.merge_cf(cf, key, 1i64.to_le_bytes()).unwrap();
    }
    let o = ankusa(&["store", "check", "--store", &store, "--json"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = v["mismatches"].as_array().unwrap();
    assert!(
        m.iter()
            .any(|m| m["kind"] == "counter" && m["ord"] == 3 && m["field"] == "pending"),
        "{m:?}"
    );
    assert_eq!(m.len(), 1, "only the tampered counter differs: {m:?}");
}

/// The pairing of delivery rows with index rows, which `store check` does
/// with point reads and per-tenant fingerprints (memory bounded by tenants):
/// a due row deleted under its delivery row, and a due row copied under a
/// second key for the same delivery row, are each named.
#[test]
fn store_check_names_delivery_rows_without_exactly_one_index_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = fixture(dir.path(), 5, 400);
    let (orphan, doubled) = {
        let db = raw_open(&store);
        let index = db.cf_handle("index").unwrap();
        let due: Vec<(Vec<u8>, Vec<u8>)> = db
            .prefix_iterator_cf(index, b"D")
            .map(|r| r.unwrap())
            .take_while(|(k, _)| k[0] == b'D')
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .take(2)
            .collect();
        let pair = |k: &[u8]| {
            (
                u64::from_be_bytes(k[13..21].try_into().unwrap()),
                u16::from_be_bytes(k[21..23].try_into().unwrap()),
            )
        };
        db.delete_cf(index, &due[0].0).unwrap();
        // The same (seq, sink) due a millisecond later: a second index row.
        let mut again = due[1].0.clone();
        let at = u64::from_be_bytes(again[5..13].try_into().unwrap()) + 1;
        again[5..13].copy_from_slice(&at.to_be_bytes());
        db.put_cf(index, &again, &due[1].1).unwrap();
        (pair(&due[0].0), pair(&due[1].0))
    };
    let o = ankusa(&["store", "check", "--store", &store, "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = v["mismatches"].as_array().unwrap();
    let named = |(seq, sink): (u64, u16), count: u32| {
        m.iter().any(|m| {
            m["kind"] == "delivery_index_count"
                && m["seq"] == seq
                && m["sink"] == sink
                && m["count"] == count
        })
    };
    assert!(named(orphan, 0), "{m:?}");
    assert!(named(doubled, 2), "{m:?}");
}

#[test]
fn bad_input_exits_with_its_documented_code_and_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let o = ankusa(&["store", "info", "--store", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no store at"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!missing.exists());

    let store = fixture(dir.path(), 3, 10);
    let o = ankusa(&["tenants", "show", "nobody", "--store", &store]);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no tenant \"nobody\""));

    let o = ankusa(&["store", "fixture", "--format", "3", "--out", &store]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "a fixture over an existing store must be refused"
    );

    let o = ankusa(&[
        "store",
        "fixture",
        "--format",
        "4",
        "--out",
        dir.path().join("x").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
}

/// `store repair` on a store with markers stripped, counters skewed and one
/// due row that no longer decodes: `store check` fails, the dry run lists
/// exactly those changes and changes nothing, the repair makes `store check`
/// pass, and the bad row is in the quarantine, listed and droppable.
#[test]
fn repair_makes_a_damaged_store_pass_check() {
    let dir = tempfile::tempdir().unwrap();
    let store = fixture(dir.path(), 20, 3_000);
    let (bad_key, stripped) = {
        let db = raw_open(&store);
        let index = db.cf_handle("index").unwrap();
        // Strip five markers.
        let markers: Vec<Vec<u8>> = db
            .prefix_iterator_cf(index, b"A")
            .map(|r| r.unwrap().0.to_vec())
            .take_while(|k| k[0] == b'A')
            .take(5)
            .collect();
        for k in &markers {
            db.delete_cf(index, k).unwrap();
        }
        // Skew tenant 3's pending counter by +7 (a merge operand).
        let counters = db.cf_handle("counters").unwrap();
        let mut ck = 3u32.to_be_bytes().to_vec();
        ck.push(1);
        db.merge_cf(counters, &ck, 7i64.to_le_bytes()).unwrap();
        // A due row whose value no longer decodes.
        let due = db
            .prefix_iterator_cf(index, b"D")
            .map(|r| r.unwrap())
            .find(|(k, _)| k[0] == b'D')
            .unwrap();
        db.put_cf(index, &due.0, [0xFF, 0x01]).unwrap();
        (due.0.to_vec(), markers.len())
    };
    assert_eq!(stripped, 5);
    assert!(!ankusa(&["store", "check", "--store", &store])
        .status
        .success());

    let dry = ankusa(&["store", "repair", "--store", &store, "--dry-run", "--json"]);
    assert!(
        dry.status.success(),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
    assert_eq!(plan["quarantined"], 1, "{plan}");
    assert!(plan["markers"].as_u64().unwrap() >= 1, "{plan}");
    let fixes = plan["counter_list"].as_array().unwrap();
    assert!(
        fixes
            .iter()
            .any(|c| c["ord"] == 3 && c["field"] == "pending"),
        "{plan}"
    );
    assert!(
        !ankusa(&["store", "check", "--store", &store])
            .status
            .success(),
        "a dry run changes nothing"
    );

    let done = ankusa(&["store", "repair", "--store", &store, "--json"]);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let rep: serde_json::Value = serde_json::from_slice(&done.stdout).unwrap();
    assert_eq!(rep["markers"], plan["markers"]);
    assert_eq!(rep["counters"], plan["counters"]);
    let check = ankusa(&["store", "check", "--store", &store]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let again = ankusa(&["store", "repair", "--store", &store, "--dry-run", "--json"]);
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(
        again["quarantined"], 0,
        "a second repair finds nothing: {again}"
    );
    assert_eq!(again["markers"], 0, "{again}");
    assert_eq!(again["counters"], 0, "{again}");

    let list = ankusa(&["store", "quarantine", "list", "--store", &store, "--json"]);
    let list: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(list["total"], 1);
    let hex: String = bad_key.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(list["rows"][0]["key"], hex.as_str());
    let info = ankusa(&["store", "info", "--store", &store, "--json"]);
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(info["quarantined"], 1);

    let drop = ankusa(&[
        "store",
        "quarantine",
        "drop",
        "--store",
        &store,
        &hex,
        "--yes",
    ]);
    assert!(
        drop.status.success(),
        "{}",
        String::from_utf8_lossy(&drop.stderr)
    );
    let list = ankusa(&["store", "quarantine", "list", "--store", &store, "--json"]);
    let list: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(list["total"], 0);
    assert!(ankusa(&["store", "check", "--store", &store])
        .status
        .success());
}

/// `store digest`: a copy of a store digests the same, a backup of it too,
/// and one tampered counter changes the digest and only its family's line.
#[test]
fn store_digest_is_equal_on_copies_and_names_the_family_that_differs() {
    let dir = tempfile::tempdir().unwrap();
    let store = fixture(dir.path(), 5, 300);
    let digest = |store: &str| -> serde_json::Value {
        let o = ankusa(&["store", "digest", "--store", store, "--json"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let before = digest(&store);
    assert_eq!(before["families"].as_array().unwrap().len(), 7, "{before}");
    assert_eq!(before["sha256"].as_str().unwrap().len(), 64, "{before}");
    let copy = dir.path().join("copy");
    let o = ankusa(&[
        "store",
        "backup",
        "--store",
        &store,
        "--out",
        copy.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(digest(copy.to_str().unwrap()), before);
    {
        let db = raw_open(&store);
        let cf = db.cf_handle("counters").unwrap();
        let mut key = 3u32.to_be_bytes().to_vec();
        key.push(1);
        db.merge_cf(cf, key, 1i64.to_le_bytes()).unwrap();
    }
    let after = digest(&store);
    assert_ne!(after["sha256"], before["sha256"]);
    let parted: Vec<&serde_json::Value> = before["families"]
        .as_array()
        .unwrap()
        .iter()
        .zip(after["families"].as_array().unwrap())
        .filter(|(x, y)| x["sha256"] != y["sha256"])
        .map(|(x, _)| &x["family"])
        .collect();
    assert_eq!(parted, vec!["counters"]);
    let text = ankusa(&["store", "digest", "--store", &store]);
    let first = String::from_utf8_lossy(&text.stdout);
    assert!(
        first.starts_with(after["sha256"].as_str().unwrap()),
        "{first}"
    );
}
