//! The workspace's floors (docs/architecture.md): each crate may depend
//! only on crates on a lower floor, so no crate imports upward and no two
//! import each other. Read from `cargo metadata`, so a forbidden edge fails
//! `make test` the moment someone adds it to a Cargo.toml.

use std::collections::BTreeMap;
use std::process::Command;

/// Floor of each workspace crate: 1 is the ground.
const FLOORS: &[(&str, u8)] = &[
    ("ankusa-store", 1),
    ("ankusa-fairness", 1),
    ("ankusa-ops", 2),
    ("ankusa-cluster", 2),
    ("ankusa-daemon", 3),
    ("ankusa-ui", 3),
    ("ankusa", 4),
];

/// Edges `from -> to` between workspace crates that break the floors: to a
/// crate on the same or a higher floor, or from or to a crate with no floor.
fn violations(floors: &[(&str, u8)], edges: &[(String, String)]) -> Vec<String> {
    let floor: BTreeMap<&str, u8> = floors.iter().copied().collect();
    let mut out = Vec::new();
    for (from, to) in edges {
        match (floor.get(from.as_str()), floor.get(to.as_str())) {
            (Some(f), Some(t)) if t < f => {}
            (Some(f), Some(t)) => out.push(format!(
                "{from} (floor {f}) depends on {to} (floor {t}): a crate may use only crates below it"
            )),
            _ => out.push(format!(
                "{from} -> {to}: give every workspace crate a floor in tests/it/layers.rs and docs/architecture.md"
            )),
        }
    }
    out
}

/// Every dependency (normal, dev and build) from one workspace crate to
/// another, by package name.
fn workspace_edges() -> Vec<(String, String)> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let names: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut edges = Vec::new();
    for p in packages {
        let from = p["name"].as_str().expect("name");
        for d in p["dependencies"].as_array().expect("dependencies") {
            let to = d["name"].as_str().expect("dependency name");
            if names.contains(&to) {
                edges.push((from.to_owned(), to.to_owned()));
            }
        }
    }
    edges
}

#[test]
fn no_crate_depends_on_its_own_floor_or_above() {
    let edges = workspace_edges();
    assert!(
        edges
            .iter()
            .any(|(f, t)| f == "ankusa-ui" && t == "ankusa-ops")
            && edges
                .iter()
                .any(|(f, t)| f == "ankusa" && t == "ankusa-daemon"),
        "the metadata was read: {edges:?}"
    );
    let bad = violations(FLOORS, &edges);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn an_upward_or_sideways_or_unplaced_edge_is_refused() {
    let e = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    assert!(violations(FLOORS, &[e("ankusa-ui", "ankusa-store")]).is_empty());
    assert_eq!(violations(FLOORS, &[e("ankusa-ops", "ankusa-ui")]).len(), 1);
    assert_eq!(
        violations(FLOORS, &[e("ankusa-store", "ankusa-fairness")]).len(),
        1
    );
    assert!(violations(FLOORS, &[e("ankusa-daemon", "ankusa-ops")]).is_empty());
    // The daemon and the console stand side by side: neither uses the other.
    assert_eq!(
        violations(FLOORS, &[e("ankusa-ui", "ankusa-daemon")]).len(),
        1
    );
    assert_eq!(
        violations(FLOORS, &[e("ankusa-daemon", "ankusa-ui")]).len(),
        1
    );
    assert_eq!(
        violations(FLOORS, &[e("ankusa-fleet", "ankusa-ops")]).len(),
        1
    );
}
