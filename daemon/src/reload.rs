//! Reloading the configuration while the daemon serves: `SIGHUP`, `ankusa
//! config reload` and `POST /v1/admin/config:reload` all end here.
//!
//! Owns: [`Live`], the part of the configuration that requests, ticks and
//! delivery attempts read (the sources with their sinks, tokens and signing
//! secrets, and the admin tokens); [`plan`], what a new file changes and
//! whether the running daemon may take it; and [`Reloader`], which applies
//! a plan and audits it.
//!
//! Invariants:
//! - A reader takes one snapshot ([`Live::current`]) and keeps it to the end
//!   of its request or attempt: it sees the old configuration or the new
//!   one, never a mix.
//! - A file is checked whole before anything changes; a refused reload
//!   changes nothing and says every reason, with file, line and key where
//!   the file is at fault.
//! - Keys a running daemon cannot change (listen addresses, the store, the
//!   writer, `[dispatch]`, `[archive]`) are refused by name, "restart
//!   needed", never silently ignored.
//! - Delivery rows name a sink by its position in its source's list. So a
//!   named sink keeps its position, new sinks go at the end, and a sink
//!   leaves in two steps: `retired = true` (it takes no new hooks and
//!   delivers its backlog), then dropped from the end of the list once
//!   nothing waits for it. A source leaves once nothing waits for any of
//!   its sinks. Rows are never rewritten by a reload.
//! - One reload at a time.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use ankusa_ops::access::Principal;
use ankusa_ops::model::{ConfigChange, ReloadReport};
use ankusa_store::Store;

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;

use super::clock::SharedClock;
use super::config::{
    endpoint, AdminSettings, ConfigError, Expiring, Generation, Int, Settings, SinkConfig, Source,
};

/// What a reload reads from: one generation of the live configuration.
#[derive(Debug)]
pub struct Routes {
    /// 0 at boot, one more per applied reload.
    pub generation: u64,
    pub sources: HashMap<String, Arc<Source>>,
    /// The sources in the file's order.
    pub order: Vec<Arc<Source>>,
    pub admin: AdminSettings,
    /// `[tenants]` weight, share, cap and rate (the share `[dispatch]
    /// per_tenant` when `[tenants]` has none).
    pub tenant_defaults: ankusa_store::policy::Policy,
}

impl Routes {
    pub fn new(generation: u64, settings: &Settings) -> Routes {
        let ticket = Arc::new(Generation(generation));
        let order: Vec<Arc<Source>> = settings
            .sources
            .iter()
            .map(|s| {
                Arc::new(Source {
                    generation: ticket.clone(),
                    ..s.clone()
                })
            })
            .collect();
        Routes {
            generation,
            sources: order.iter().map(|s| (s.id.clone(), s.clone())).collect(),
            order,
            admin: settings.admin.clone(),
            // The share a tenant gets without one of its own or in
            // `[tenants]` is `[dispatch] per_tenant`.
            tenant_defaults: ankusa_store::policy::Policy {
                share: settings
                    .tenant_defaults
                    .share
                    .or(Some(settings.dispatch.per_tenant)),
                ..settings.tenant_defaults
            },
        }
    }

    pub fn source(&self, id: &str) -> Option<&Arc<Source>> {
        self.sources.get(id)
    }

    /// Sink `sink` of source `source`, if this generation has it (a
    /// tombstone is no sink: nothing is delivered to it).
    pub fn sink(&self, source: &str, sink: u16) -> Option<SinkHandle> {
        let s = self.sources.get(source)?;
        let index = usize::from(sink);
        s.sinks
            .get(index)
            .is_some_and(|k| !k.dropped)
            .then(|| SinkHandle {
                source: s.clone(),
                index,
            })
    }
}

/// One configured sink, kept alive with its source's snapshot.
#[derive(Debug, Clone)]
pub struct SinkHandle {
    source: Arc<Source>,
    index: usize,
}

impl std::ops::Deref for SinkHandle {
    type Target = SinkConfig;
    fn deref(&self) -> &SinkConfig {
        // Built only by `Routes::sink`, after the bound check.
        &self.source.sinks[self.index]
    }
}

/// The live configuration: swapped whole by a reload.
#[derive(Debug)]
pub struct Live {
    routes: RwLock<Arc<Routes>>,
    /// The generations swapped out, alive while anything admitted under
    /// them is.
    past: Mutex<Vec<Weak<Generation>>>,
}

impl Live {
    pub fn new(settings: &Settings) -> Live {
        Live {
            routes: RwLock::new(Arc::new(Routes::new(0, settings))),
            past: Mutex::new(Vec::new()),
        }
    }

    /// The oldest generation something still holds: a request admitted
    /// under it and not answered, a delivery attempt through one of its
    /// sinks, a tick that read it. The current one when nothing older is
    /// held.
    pub fn oldest_in_flight(&self) -> u64 {
        let current = self.current().generation;
        let mut past = self.past.lock().unwrap_or_else(PoisonError::into_inner);
        past.retain(|w| w.strong_count() > 0);
        past.iter()
            .filter_map(Weak::upgrade)
            .map(|g| g.0)
            .fold(current, u64::min)
    }

    /// The configuration now; keep it for the whole request or attempt.
    pub fn current(&self) -> Arc<Routes> {
        self.routes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn swap(&self, routes: Routes) {
        let old = std::mem::replace(
            &mut *self.routes.write().unwrap_or_else(PoisonError::into_inner),
            Arc::new(routes),
        );
        if let Some(s) = old.order.first() {
            self.past
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Arc::downgrade(&s.generation));
        }
    }
}

/// Why a reload did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file does not parse or check (file, line and key in the text).
    #[error("{0}")]
    Invalid(#[from] ConfigError),
    /// The file is valid but the running daemon cannot take it: every
    /// reason, one per line.
    #[error("{}", .0.join("\n"))]
    Refused(Vec<String>),
    #[error("cannot read or write the store: {0}")]
    Store(#[from] ankusa_store::StoreError),
}

/// The keys a running daemon keeps from its boot: each change is named.
fn restart_needed(old: &Settings, new: &Settings) -> Vec<String> {
    // Each key as both files give it, shown the same way.
    let key = |f: fn(&Settings) -> String| (f(old), f(new));
    let keys: [(&str, (String, String)); 14] = [
        ("store.path", key(|s| s.store_path.display().to_string())),
        ("store.cache", key(|s| s.store_cache.to_string())),
        (
            "node.id",
            key(|s| format!("{:?}", s.node_id.as_ref().map(ToString::to_string))),
        ),
        ("http.listen", key(|s| s.listen.to_string())),
        ("http.max_body", key(|s| s.max_body.to_string())),
        (
            "http.body_timeout",
            key(|s| format!("{:?}", s.body_timeout)),
        ),
        ("http.max_requests", key(|s| s.max_requests.to_string())),
        (
            "http.max_connections",
            key(|s| s.max_connections.to_string()),
        ),
        (
            "http.header_timeout",
            key(|s| format!("{:?}", s.header_timeout)),
        ),
        (
            "http.shutdown_timeout",
            key(|s| format!("{:?}", s.shutdown_timeout)),
        ),
        ("http.metrics", key(|s| s.metrics.to_string())),
        ("tenants.max", key(|s| s.writer.tenants_max.to_string())),
        ("admin.socket", key(|s| s.admin.socket.to_string())),
        ("admin.listen", key(|s| format!("{:?}", s.admin.listen))),
    ];
    let mut out: Vec<String> = keys
        .into_iter()
        .filter(|(_, (a, b))| a != b)
        .map(|(k, (a, b))| format!("{k} changed ({a} -> {b}): restart needed"))
        .collect();
    // Sections read once by the writer, the dispatcher and the archiver:
    // named as sections (their Debug forms hold no secret).
    let sections = [
        ("[writer]", key(|s| writer_tables(s).0)),
        ("[ingest]", key(|s| writer_tables(s).1)),
        ("[dispatch]", key(|s| format!("{:?}", s.dispatch))),
        ("[archive]", key(|s| format!("{:?}", s.archive))),
        // Its secret's Debug form is redacted.
        ("[cluster]", key(|s| format!("{:?}", s.cluster))),
    ];
    for (k, (a, b)) in sections {
        if a != b {
            out.push(format!("{k} changed: restart needed"));
        }
    }
    out
}

/// The writer's settings as the two tables they come from, `[writer]` and
/// `[ingest]`. Destructured whole, so a field added to the writer's
/// settings does not compile until it is placed in a table here (or said
/// to be named elsewhere).
fn writer_tables(s: &Settings) -> (String, String) {
    let crate::config::WriterSettings {
        queue,
        queue_bytes,
        max_batch,
        max_batch_bytes,
        linger,
        dedupe_ttl,
        sweep_interval,
        sweep_batch,
        // Named as a key of its own (`tenants.max`), and by `[archive]`.
        tenants_max: _,
        archive: _,
    } = &s.writer;
    (
        format!(
            "{:?}",
            (queue, queue_bytes, max_batch, max_batch_bytes, linger)
        ),
        format!("{:?}", (dedupe_ttl, sweep_interval, sweep_batch)),
    )
}

fn sink_label(source: &str, index: usize, k: &SinkConfig) -> String {
    format!(
        "{source}/{}",
        k.name.clone().unwrap_or_else(|| index.to_string())
    )
}

/// What differs between two sinks at one position. The URL is shown as
/// scheme, host and port only (a path or query may hold a secret); secrets
/// are named, never shown.
fn sink_details(a: &SinkConfig, b: &SinkConfig) -> Vec<String> {
    let mut d = Vec::new();
    if a.url != b.url {
        let (ea, eb) = (endpoint(&a.url), endpoint(&b.url));
        d.push(if ea == eb {
            format!("url changed (path or query, at {eb})")
        } else {
            format!("url {ea} -> {eb}")
        });
    }
    let mut dur = |key: &str, x: std::time::Duration, y: std::time::Duration| {
        if x != y {
            d.push(format!(
                "{key} {} -> {}",
                humantime::format_duration(x),
                humantime::format_duration(y)
            ));
        }
    };
    dur("timeout", a.timeout.0, b.timeout.0);
    dur("backoff_initial", a.backoff_initial.0, b.backoff_initial.0);
    dur("backoff_max", a.backoff_max.0, b.backoff_max.0);
    dur("retry_after_max", a.retry_after_max.0, b.retry_after_max.0);
    if a.max_attempts != b.max_attempts {
        d.push(format!(
            "max_attempts {} -> {}",
            a.max_attempts.0, b.max_attempts.0
        ));
    }
    if a.retry_4xx != b.retry_4xx {
        d.push(format!("retry_4xx {} -> {}", a.retry_4xx, b.retry_4xx));
    }
    if let Some(c) = secrets_change("signing_secret", &a.signing_keys, &b.signing_keys) {
        d.push(c);
    }
    if format!("{:?}", a.breaker) != format!("{:?}", b.breaker) {
        d.push(match (&a.breaker, &b.breaker) {
            (None, Some(_)) => "breaker added".into(),
            (Some(_), None) => "breaker removed".into(),
            _ => "breaker changed".into(),
        });
    }
    if a.max_in_flight != b.max_in_flight {
        let n = |v: Option<Int<1, 1_000_000>>| v.map_or("per_sink".to_owned(), |v| v.0.to_string());
        d.push(format!(
            "max_in_flight {} -> {}",
            n(a.max_in_flight),
            n(b.max_in_flight)
        ));
    }
    if a.rate != b.rate {
        let r =
            |v: Option<ankusa_store::policy::Rate>| v.map_or("none".to_owned(), |v| v.to_string());
        d.push(format!("rate {} -> {}", r(a.rate), r(b.rate)));
    }
    if a.patterns != b.patterns {
        let e = |v: &Option<Vec<crate::routing::Pattern>>| match v {
            None => "every type".to_owned(),
            Some(ps) => patterns(ps),
        };
        d.push(format!("events {} -> {}", e(&a.patterns), e(&b.patterns)));
    }
    if a.retired != b.retired {
        d.push(if b.retired {
            "retired: takes no new hooks".into()
        } else {
            "no longer retired".into()
        });
    }
    d
}

/// A sink's `events` as the diff shows them: `[invoice.*, customer.created]`.
fn patterns(ps: &[crate::routing::Pattern]) -> String {
    format!(
        "[{}]",
        ps.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// How a key's secrets changed, naming none of them: one secret for
/// another is `changed`; a rotation lists what it added, removed and
/// re-dated.
fn secrets_change<T: PartialEq>(key: &str, a: &[Expiring<T>], b: &[Expiring<T>]) -> Option<String> {
    if a == b {
        return None;
    }
    Some(match (a, b) {
        ([], _) => format!("{key} set"),
        (_, []) => format!("{key} removed"),
        ([x], [y]) if x.value != y.value => format!("{key} changed"),
        _ => {
            let added = b
                .iter()
                .filter(|x| !a.iter().any(|y| y.value == x.value))
                .count();
            let removed = a
                .iter()
                .filter(|x| !b.iter().any(|y| y.value == x.value))
                .count();
            let redated = b
                .iter()
                .filter(|x| {
                    a.iter()
                        .any(|y| y.value == x.value && y.expires_at != x.expires_at)
                })
                .count();
            let mut parts = Vec::new();
            for (n, what) in [
                (added, "added"),
                (removed, "removed"),
                (redated, "with a new expiry"),
            ] {
                if n > 0 {
                    parts.push(format!("{n} {what}"));
                }
            }
            format!("{key}s: {}", parts.join(", "))
        }
    })
}

fn source_details(a: &Source, b: &Source) -> Vec<String> {
    let mut d = Vec::new();
    if a.tenant != b.tenant {
        d.push("tenant rule changed".into());
    }
    if let Some(c) = secrets_change("token", &a.tokens, &b.tokens) {
        d.push(c);
    }
    if let Some(c) = secrets_change("signing_secret", &a.signing_keys, &b.signing_keys) {
        d.push(c);
    }
    if a.signature_tolerance != b.signature_tolerance {
        d.push(format!(
            "signature_tolerance {} -> {}",
            humantime::format_duration(a.signature_tolerance),
            humantime::format_duration(b.signature_tolerance)
        ));
    }
    if a.max_body != b.max_body {
        d.push(format!("max_body {} -> {}", a.max_body, b.max_body));
    }
    if a.keep_headers != b.keep_headers {
        d.push("forward_headers changed".into());
    }
    if a.weight != b.weight {
        d.push(format!("weight {} -> {}", a.weight, b.weight));
    }
    if a.event_type != b.event_type {
        let e = |v: &Option<crate::routing::EventTypeFrom>| {
            v.as_ref().map_or("none".to_owned(), ToString::to_string)
        };
        d.push(format!(
            "event_type {} -> {}",
            e(&a.event_type),
            e(&b.event_type)
        ));
    }
    d
}

fn change(kind: &str, what: &str, name: String, details: Vec<String>) -> ConfigChange {
    ConfigChange {
        kind: kind.into(),
        what: what.into(),
        name,
        details,
    }
}

/// [`plan`] after putting `new`'s sinks at the positions `previous` gave
/// out (`crate::slots`), with every sink that leaves checked by
/// [`crate::slots::check_leaving`]: what the reload changes, and the
/// alignment (the sinks that leave, the tombstones of sources gone), or
/// every reason the running daemon cannot take `new`. `generation` is the
/// one `new` will run as; `admitted` the oldest generation anything in
/// flight was admitted under.
pub fn aligned_plan(
    old: &Settings,
    new: &mut Settings,
    previous: &crate::slots::Previous,
    generation: u64,
    owed: &mut crate::slots::Owed<'_>,
    admitted: u64,
) -> Result<(Vec<ConfigChange>, crate::slots::Alignment), ReloadError> {
    let alignment =
        crate::slots::align_all(new, previous, generation).map_err(ReloadError::Refused)?;
    let mut refused = Vec::new();
    let mut changes = match plan(old, new) {
        Ok(c) => c,
        Err(ReloadError::Refused(why)) => {
            refused = why;
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    if let Err(why) = crate::slots::check_leaving(&alignment.leaving, owed, Some(admitted))? {
        refused.extend(why);
    }
    if !refused.is_empty() {
        return Err(ReloadError::Refused(refused));
    }
    for id in &alignment.reordered {
        changes.push(change(
            "changed",
            "source",
            id.clone(),
            vec!["sinks listed in another order: each keeps its position".into()],
        ));
    }
    Ok((changes, alignment))
}

/// What replacing `old` by `new`, both aligned (`crate::slots`), changes,
/// or every key the running daemon cannot change. Whether a sink may
/// leave is [`crate::slots::check_leaving`]'s to say.
pub fn plan(old: &Settings, new: &Settings) -> Result<Vec<ConfigChange>, ReloadError> {
    let refused = restart_needed(old, new);
    let mut changes = Vec::new();
    let new_by_id: HashMap<&str, &Source> =
        new.sources.iter().map(|s| (s.id.as_str(), s)).collect();
    for a in &old.sources {
        let Some(b) = new_by_id.get(a.id.as_str()) else {
            changes.push(change("removed", "source", a.id.clone(), Vec::new()));
            continue;
        };
        let d = source_details(a, b);
        if !d.is_empty() {
            changes.push(change("changed", "source", a.id.clone(), d));
        }
        plan_sinks(a, b, &mut changes);
    }
    let old_ids: std::collections::HashSet<&str> =
        old.sources.iter().map(|s| s.id.as_str()).collect();
    for b in &new.sources {
        if !old_ids.contains(b.id.as_str()) {
            let sinks = b
                .sinks
                .iter()
                .enumerate()
                .filter(|(_, k)| !k.dropped)
                .map(|(i, k)| format!("sink {} ({})", sink_label(&b.id, i, k), endpoint(&k.url)))
                .collect();
            changes.push(change("added", "source", b.id.clone(), sinks));
        }
    }
    plan_admin_tokens(&old.admin, &new.admin, &mut changes);
    if new.admin.local_admin != old.admin.local_admin {
        changes.push(change(
            "changed",
            "admin",
            "local_admin".into(),
            vec![format!(
                "{} -> {}",
                old.admin.local_admin, new.admin.local_admin
            )],
        ));
    }
    let defaults = ankusa_ops::policy::describe_tenant(&old.tenant_defaults, &new.tenant_defaults);
    if old.tenant_defaults != new.tenant_defaults {
        changes.push(change(
            "changed",
            "tenants",
            "defaults".into(),
            vec![defaults],
        ));
    }
    if refused.is_empty() {
        Ok(changes)
    } else {
        Err(ReloadError::Refused(refused))
    }
}

/// A source's sinks, position by position (aligned: the same position is
/// the same sink, or its tombstone).
fn plan_sinks(a: &Source, b: &Source, changes: &mut Vec<ConfigChange>) {
    for (i, old) in a.sinks.iter().enumerate() {
        let label = sink_label(&a.id, i, old);
        let Some(new) = b.sinks.get(i) else { continue };
        if old.dropped {
            continue;
        }
        if new.dropped {
            changes.push(change("removed", "sink", label, Vec::new()));
        } else if new.name == old.name {
            let d = sink_details(old, new);
            if !d.is_empty() {
                changes.push(change("changed", "sink", label, d));
            }
        } else {
            // The same endpoint under a new name: only its label changes.
            let mut d = vec![format!("renamed to {}", sink_label(&b.id, i, new))];
            d.extend(sink_details(old, new));
            changes.push(change("changed", "sink", label, d));
        }
    }
    for (i, new) in b.sinks.iter().enumerate().skip(a.sinks.len()) {
        let mut d = vec![endpoint(&new.url)];
        if let Some(ps) = &new.patterns {
            d.push(format!("events {}", patterns(ps)));
        }
        changes.push(change("added", "sink", sink_label(&b.id, i, new), d));
    }
}

fn plan_admin_tokens(old: &AdminSettings, new: &AdminSettings, changes: &mut Vec<ConfigChange>) {
    let by_name = |s: &AdminSettings| {
        s.tokens
            .iter()
            .map(|t| (t.name.clone(), (t.digest, t.tenant.clone())))
            .collect::<HashMap<_, _>>()
    };
    let (a, b) = (by_name(old), by_name(new));
    let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        match (a.get(name), b.get(name)) {
            (Some(_), None) => changes.push(change("removed", "admin token", name.clone(), vec![])),
            (None, Some(_)) => changes.push(change("added", "admin token", name.clone(), vec![])),
            (Some(x), Some(y)) if x != y => {
                let mut d = Vec::new();
                if x.0 != y.0 {
                    d.push("token changed".into());
                }
                if x.1 != y.1 {
                    d.push(format!("tenant {:?} -> {:?}", x.1, y.1));
                }
                changes.push(change("changed", "admin token", name.clone(), d));
            }
            _ => {}
        }
    }
}

/// Applies reloads: one at a time, each checked whole first.
pub struct Reloader {
    live: Arc<Live>,
    store: Arc<Store>,
    control: Arc<super::sink_control::SinkControl>,
    clock: SharedClock,
    /// The settings in force (boot's, then each applied reload's).
    applied: Mutex<Settings>,
    /// Tell systemd (RELOADING=1, then READY=1).
    notify: bool,
}

impl Reloader {
    pub fn new(
        live: Arc<Live>,
        store: Arc<Store>,
        control: Arc<super::sink_control::SinkControl>,
        clock: SharedClock,
        settings: Settings,
        notify: bool,
    ) -> Reloader {
        Reloader {
            live,
            store,
            control,
            clock,
            applied: Mutex::new(settings),
            notify,
        }
    }

    pub fn live(&self) -> &Arc<Live> {
        &self.live
    }

    /// What `text` (a candidate for the daemon's file) would change, without
    /// changing anything.
    pub fn check(&self, text: &str) -> Result<ReloadReport, ReloadError> {
        let applied = self.applied.lock().unwrap_or_else(PoisonError::into_inner);
        let mut new = parse_like(&applied, text)?;
        let (changes, _) = self.aligned(&applied, &mut new)?;
        Ok(ReloadReport {
            applied: false,
            file: applied.config_path.display().to_string(),
            generation: self.live.current().generation,
            changes,
        })
    }

    /// Re-reads the daemon's file and applies it, or changes nothing.
    /// Blocking (it reads the file and writes the store): call it off the
    /// runtime's workers.
    pub fn reload(&self, who: &Principal) -> Result<ReloadReport, ReloadError> {
        let mut applied = self.applied.lock().unwrap_or_else(PoisonError::into_inner);
        if self.notify {
            super::notify::reloading();
        }
        let result = self.reload_locked(&mut applied, who);
        if self.notify {
            super::notify::ready();
        }
        let now = self.clock.now_ms();
        let (outcome, scope, n) = match &result {
            Ok(r) => ("done", summary(&r.changes), r.changes.len() as u64),
            Err(e) => ("failed", e.to_string().replace('\n', "; "), 0),
        };
        if let Err(e) = ankusa_ops::jobs::audit_store_action(
            &self.store,
            who,
            "config_reload",
            &scope,
            outcome,
            n,
            now,
        ) {
            tracing::error!(error = %e, "cannot audit the configuration reload");
        }
        match &result {
            Ok(r) => tracing::warn!(
                generation = r.generation,
                changes = %summary(&r.changes),
                "configuration reloaded"
            ),
            Err(e) => tracing::error!(
                error = %e,
                "configuration reload refused; the running configuration is unchanged"
            ),
        }
        result
    }

    /// The file is read and planned before anything changes; the one step
    /// after that which can fail, the catalog write, goes first, so a
    /// failure leaves the daemon as it was.
    fn reload_locked(
        &self,
        applied: &mut Settings,
        who: &Principal,
    ) -> Result<ReloadReport, ReloadError> {
        let mut new = Settings::load(&applied.config_path)?;
        let (changes, alignment) = self.aligned(applied, &mut new)?;
        let mut catalog: Vec<_> = new.sources.iter().flat_map(|s| s.catalog()).collect();
        catalog.extend(alignment.ghosts);
        ankusa_store::sinks::replace(&self.store, &catalog)?;
        // Breakers and the health board before the swap: a delivery to a
        // new sink finds its breaker.
        self.control.reconfigure(&new.sources);
        let generation = self.live.current().generation + 1;
        self.live.swap(Routes::new(generation, &new));
        let file = new.config_path.display().to_string();
        *applied = new;
        // After the swap, and only logged: the sinks have left, and what
        // was keyed by their positions can reach no other sink.
        if let Err(e) =
            crate::slots::forget(&self.store, &alignment.leaving, who, self.clock.now_ms())
        {
            tracing::error!(error = %e, "cannot delete the limits and pauses of the dropped sinks");
        }
        // As at boot: a pause a breaker made stays when its breaker goes.
        // After the swap, and only logged: the reload has happened.
        match super::breaker::orphans(&self.store, &self.control.breakers) {
            Ok(scopes) => {
                for scope in scopes {
                    tracing::warn!(
                        %scope,
                        "a circuit breaker paused this sink, which has no breaker configured now: \
                         nothing will probe or resume it; resume it with `ankusa sinks resume`"
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the pauses after the reload"),
        }
        Ok(ReloadReport {
            applied: true,
            file,
            generation,
            changes,
        })
    }

    /// `new` aligned with the running configuration and the catalog's
    /// tombstones, planned, and every sink that leaves checked.
    fn aligned(
        &self,
        applied: &Settings,
        new: &mut Settings,
    ) -> Result<(Vec<ConfigChange>, crate::slots::Alignment), ReloadError> {
        let catalog = ankusa_store::sinks::catalog(&self.store)?;
        let previous = crate::slots::of_settings(applied, &catalog);
        let generation = self.live.current().generation + 1;
        aligned_plan(
            applied,
            new,
            &previous,
            generation,
            &mut |s: &ankusa_store::sinks::SinkRef| ankusa_store::waiting::owed(&self.store, s),
            self.live.oldest_in_flight(),
        )
    }
}

/// Parses `text` as if it were the file at `applied.config_path` (so a
/// relative store path resolves the same way).
fn parse_like(applied: &Settings, text: &str) -> Result<Settings, ConfigError> {
    let path = &applied.config_path;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    Settings::parse(text, path, &base)
}

/// One line per change, for the audit log and the log line.
pub fn summary(changes: &[ConfigChange]) -> String {
    if changes.is_empty() {
        return "no changes".into();
    }
    changes
        .iter()
        .map(|c| {
            if c.details.is_empty() {
                format!("{} {} {}", c.kind, c.what, c.name)
            } else {
                format!(
                    "{} {} {} ({})",
                    c.kind,
                    c.what,
                    c.name,
                    c.details.join(", ")
                )
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Installs the `SIGHUP` handler. Call it before the daemon says it
/// listens: the signal's default action ends the process.
pub fn hangups() -> std::io::Result<Signal> {
    signal(SignalKind::hangup())
}

/// Who a reload by signal is audited as.
pub fn signal_principal() -> Principal {
    Principal {
        name: "signal:SIGHUP".into(),
        os_user: None,
        tenant: None,
    }
}

/// Reloads on every `SIGHUP` until `stop`. The outcome is logged (and
/// audited by [`Reloader::reload`]); a refused reload leaves the daemon as
/// it was.
pub async fn on_sighup(reloader: Arc<Reloader>, mut hup: Signal, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            got = hup.recv() => if got.is_none() { return },
            _ = stop.wait_for(|s| *s) => return,
        }
        let r = reloader.clone();
        let done = tokio::task::spawn_blocking(move || r.reload(&signal_principal())).await;
        if let Err(e) = done {
            tracing::error!(error = %e, "the configuration reload panicked");
        }
    }
}

#[cfg(test)]
mod tests;
