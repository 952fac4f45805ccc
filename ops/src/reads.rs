//! Bounded reads for operators: node stats, tenant pages, one tenant, DLQ
//! pages and one DLQ entry.
//!
//! Every function's cost is what it returns: counters are point reads,
//! pages are bounded scans resumed from a cursor, the active-tenant count is
//! a walk of at most [`queries::MARKER_BUDGET`] markers. None folds a row
//! family. A tenant-scoped caller's DLQ reads scan only its tenant's `X`
//! range.

use ankusa_store::node::NodeIdentity;
use ankusa_store::pauses::{self, Pause, SinkRef};
use ankusa_store::queries::{self, DlqCursor, DlqOrder};
use ankusa_store::sinks;
use ankusa_store::tenants::{self, Name};
use ankusa_store::{Field, HookId, HookIdError, Store};

use crate::access::Principal;
use crate::model::{
    AttemptView, DeadSink, DlqDetail, DlqEntry, DlqPage, HookView, PauseView, PausesPage, SinkView,
    SinksPage, Stats, TenantDetail, TenantsPage,
};
use crate::{OpsError, Result};

/// Largest page any listing returns.
pub const MAX_PAGE: usize = 1000;

/// Checks a listing's `limit`: every listing refuses 0 and past [`MAX_PAGE`] alike.
pub fn page_size(limit: usize) -> Result<usize> {
    if limit == 0 || limit > MAX_PAGE {
        return Err(OpsError::BadRequest(format!(
            "limit must be 1 to {MAX_PAGE}, not {limit}"
        )));
    }
    Ok(limit)
}

/// Node-wide numbers (admin only).
pub fn stats(store: &Store, who: &Principal, now: u64) -> Result<Stats> {
    who.require_admin("node stats")?;
    // The same summary as `ankusa store info`.
    let i = ankusa_store::info::gather(store, now)?;
    Ok(Stats {
        store: i.path,
        format: i.format.unwrap_or(0),
        node: i.node,
        totals: i.totals,
        oldest_due_age_ms: i.oldest_due.filter(|o| o.at <= now).map(|o| o.age_ms(now)),
        tenants: i.tenants,
        active_tenants: i.active.tenants as u64,
        active_exact: i.active.complete,
        daemon: None,
    })
}

/// A page of tenants: in ordinal order (cursor: the last ordinal), or by a
/// counter, largest first (cursor: `value:ordinal`). A tenant-scoped
/// caller sees a page holding only its own tenant.
pub fn tenants_page(
    store: &Store,
    who: &Principal,
    sort: Option<&str>,
    cursor: Option<&str>,
    limit: usize,
) -> Result<TenantsPage> {
    let mut page = tenants_rows(store, who, sort, cursor, limit)?;
    page.paused = paused_among(store, page.tenants.iter().map(|t| t.id.as_str()))?;
    page.policies = with_policy_among(store, page.tenants.iter().map(|t| t.id.as_str()))?;
    Ok(page)
}

/// Which of `ids` have a policy of their own (one point read each).
pub fn with_policy_among<'a>(
    store: &Store,
    ids: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for id in ids {
        if ankusa_store::policy::tenant(store, id)?.is_some() {
            out.push(id.to_owned());
        }
    }
    Ok(out)
}

fn tenants_rows(
    store: &Store,
    who: &Principal,
    sort: Option<&str>,
    cursor: Option<&str>,
    limit: usize,
) -> Result<TenantsPage> {
    let limit = page_size(limit)?;
    if let Some(own) = &who.tenant {
        let ord = who.tenant_ord(store, own)?;
        let (counters, totals) = queries::tallies(store, ord)?;
        return Ok(TenantsPage {
            tenants: vec![tenants::TenantInfo {
                ord,
                id: own.clone(),
                counters,
                totals,
            }],
            next: None,
            paused: Vec::new(),
            policies: Vec::new(),
        });
    }
    let bad_cursor = |c: &str| OpsError::BadRequest(format!("bad cursor {c:?}"));
    match sort {
        None => {
            let after = match cursor {
                Some(c) => Some(c.parse::<u32>().map_err(|_| bad_cursor(c))?),
                None => None,
            };
            let list = tenants::page(store, after, limit)?;
            let next = (list.len() == limit)
                .then(|| list.last().map(|t| t.ord.to_string()))
                .flatten();
            Ok(TenantsPage {
                tenants: list,
                next,
                paused: Vec::new(),
                policies: Vec::new(),
            })
        }
        Some(f) => {
            let field = Field::parse(f).ok_or_else(|| {
                OpsError::BadRequest(format!(
                    "unknown counter {f:?}: sort by pending, scheduled, inflight, dead, bytes or archive_pending"
                ))
            })?;
            let after = match cursor {
                Some(c) => {
                    let (v, o) = c.split_once(':').ok_or_else(|| bad_cursor(c))?;
                    Some((
                        v.parse::<i64>().map_err(|_| bad_cursor(c))?,
                        o.parse::<u32>().map_err(|_| bad_cursor(c))?,
                    ))
                }
                None => None,
            };
            let (list, last) = tenants::top_by_after(store, field, after, limit)?;
            let next = last.map(|(v, o)| format!("{v}:{o}"));
            Ok(TenantsPage {
                tenants: list,
                next,
                paused: Vec::new(),
                policies: Vec::new(),
            })
        }
    }
}

/// One tenant: counters, first due row, five newest dead rows.
pub fn tenant_detail(
    store: &Store,
    who: &Principal,
    tenant: &str,
    now: u64,
) -> Result<TenantDetail> {
    let ord = who.tenant_ord(store, tenant)?;
    let (counters, totals) = queries::tallies(store, ord)?;
    // A parked row's due time is a placeholder, not a time to show.
    let first = queries::first_due(store, ord, queries::DueFrom::At(0))?
        .filter(|r| r.at < pauses::PARKED_AT);
    let dlq = queries::dlq_page_for_tenant(store, ord, None, 5)?;
    let paused = holding(store, tenant)?;
    let catalog = sinks::catalog(store)?;
    Ok(TenantDetail {
        tenant: tenant.to_owned(),
        ord,
        counters,
        totals,
        first_due_at: first.as_ref().map(|r| r.at),
        oldest_due_age_ms: first.map(|r| now.saturating_sub(r.at)),
        latest_dead: dlq
            .entries
            .into_iter()
            .map(|row| DlqEntry {
                tenant: tenant.to_owned(),
                sink_name: sinks::display(&catalog, &row.source_id, row.sink),
                row,
            })
            .collect(),
        paused,
        policy: ankusa_store::policy::tenant(store, tenant)?,
    })
}

/// The node's sinks (the catalog the daemon wrote at boot or at its last
/// reload, tombstones left out) with their pauses. A tenant caller sees
/// every sink and only its own tenant pauses.
pub fn sinks(store: &Store, who: &Principal) -> Result<SinksPage> {
    let all = pauses::list(store)?;
    let mut catalog = ankusa_store::sinks::catalog(store)?;
    catalog.retain(|e| !e.dropped());
    // Node-wide counts: a tenant's token does not see other tenants' load.
    let waiting = match who.tenant {
        Some(_) => None,
        None => {
            let keys: Vec<_> = catalog
                .iter()
                .map(ankusa_store::sinks::SinkEntry::sink_ref)
                .collect();
            ankusa_store::waiting::waiting(store, &keys)?
        }
    };
    let (_, limited) = ankusa_store::policy::list(store)?;
    let sinks = catalog
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let limits = limited
                .iter()
                .find(|l| l.sink.source == e.source && l.sink.sink == e.index)
                .map(|l| l.limits);
            let mine = |p: &&pauses::Pause| {
                p.scope
                    .sink
                    .as_ref()
                    .is_some_and(|s| s.source == e.source && s.sink == e.index)
            };
            SinkView {
                paused: all.iter().filter(mine).any(|p| p.scope.tenant.is_none()),
                paused_for: all
                    .iter()
                    .filter(mine)
                    .filter_map(|p| p.scope.tenant.clone())
                    .filter(|t| who.tenant.as_ref().is_none_or(|own| own == t))
                    .collect(),
                source: e.source,
                index: e.index,
                name: e.name,
                endpoint: e.endpoint,
                waiting: waiting.as_ref().and_then(|w| w.get(i).copied()),
                health: None,
                limits,
            }
        })
        .collect();
    Ok(SinksPage { sinks })
}

/// Dead rows a page narrowed to one sink walks at most: the sink's rows
/// may be few among many, so the walk, not the page, is what bounds the
/// work. Two full pages' worth of rows.
pub const SINK_WALK: usize = 2 * MAX_PAGE;

/// What a DLQ page is narrowed to. Each narrowing is a bounded walk
/// ([`SINK_WALK`] rows), and both may be given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DlqFilter {
    /// `SOURCE/SINK`, by name or position.
    pub sink: Option<String>,
    /// An event type pattern (`invoice.*`, `customer.created`;
    /// [`crate::event_type::Pattern`]).
    pub event_type: Option<String>,
}

impl DlqFilter {
    pub fn is_empty(&self) -> bool {
        self.sink.is_none() && self.event_type.is_none()
    }
}

/// A DLQ page, newest first (or oldest first): one tenant's, or (admin
/// only) the node's; narrowed by `filter` to one sink's rows and/or the
/// rows of hooks whose event type matches a pattern. A tenant-scoped
/// caller who names no tenant gets its own.
///
/// A narrowed page walks at most [`SINK_WALK`] dead rows: it may come back
/// short (even empty) with a `next` cursor, the row the walk stopped at,
/// from which the next call continues.
pub fn dlq_page(
    store: &Store,
    who: &Principal,
    tenant: Option<&str>,
    order: DlqOrder,
    cursor: Option<&str>,
    limit: usize,
    filter: &DlqFilter,
) -> Result<DlqPage> {
    let limit = page_size(limit)?;
    let cursor = match cursor {
        Some(c) => Some(
            DlqCursor::parse(c).ok_or_else(|| OpsError::BadRequest(format!("bad cursor {c:?}")))?,
        ),
        None => None,
    };
    let tenant = tenant.or(who.tenant.as_deref());
    let ord = match tenant {
        Some(t) => Some(who.tenant_ord(store, t)?),
        None => None,
    };
    let pattern = match &filter.event_type {
        Some(p) => Some(
            crate::event_type::Pattern::parse(p)
                .map_err(|m| OpsError::BadRequest(format!("event type pattern {m}")))?,
        ),
        None => None,
    };
    let page = if filter.is_empty() {
        queries::dlq_page_ordered(store, ord, order, cursor, limit)?
    } else {
        let sink = match &filter.sink {
            Some(name) => Some(resolve_sink(store, name)?),
            None => None,
        };
        filtered_page(store, ord, order, cursor, limit, |row| {
            sink.as_ref()
                .is_none_or(|k| row.sink == k.sink && row.source_id == k.source)
                && pattern
                    .as_ref()
                    .is_none_or(|p| p.matches_hook(row.event_type.as_deref()))
        })?
    };
    let mut names = std::collections::HashMap::new();
    let catalog = sinks::catalog(store)?;
    let mut entries = Vec::with_capacity(page.entries.len());
    for row in page.entries {
        let name = match names.get(&row.ord) {
            Some(n) => String::clone(n),
            None => {
                let n = tenant_name(store, row.ord)?;
                names.insert(row.ord, n.clone());
                n
            }
        };
        entries.push(DlqEntry {
            tenant: name,
            sink_name: sinks::display(&catalog, &row.source_id, row.sink),
            row,
        });
    }
    Ok(DlqPage {
        entries,
        next: page.next.map(|c| c.encode()),
    })
}

/// The rows `keep` accepts among a DLQ's, walking pages of the same order
/// until `limit` match or [`SINK_WALK`] rows were seen. A row's source
/// and event type are in its DLQ value, so no hook is read.
pub fn filtered_page(
    store: &Store,
    ord: Option<u32>,
    order: DlqOrder,
    mut cursor: Option<DlqCursor>,
    limit: usize,
    keep: impl Fn(&ankusa_store::DeadRow) -> bool,
) -> std::result::Result<queries::DlqPage, ankusa_store::StoreError> {
    let mut entries = Vec::new();
    let mut walked = 0usize;
    loop {
        // Pages a few times the rows wanted: a screen's page is found in a
        // read or two when the rows kept are common, without reading a
        // thousand rows for eight.
        let chunk = (SINK_WALK - walked).min((limit * 4).clamp(16, MAX_PAGE));
        let page = queries::dlq_page_ordered(store, ord, order, cursor, chunk)?;
        let seen = page.entries.len();
        walked += seen;
        for (i, row) in page.entries.into_iter().enumerate() {
            if !keep(&row) {
                continue;
            }
            let at = DlqCursor {
                at: row.at,
                seq: row.seq,
                sink: row.sink,
            };
            entries.push(row);
            if entries.len() == limit {
                // Rows remain after this one: continue from it.
                let more = i + 1 < seen || page.next.is_some();
                return Ok(queries::DlqPage {
                    entries,
                    next: more.then_some(at),
                });
            }
        }
        match page.next {
            // The walk is spent: the caller continues where it stopped.
            Some(n) if walked < SINK_WALK => cursor = Some(n),
            next => return Ok(queries::DlqPage { entries, next }),
        }
    }
}

fn tenant_name(store: &Store, ord: u32) -> Result<String> {
    Ok(match tenants::name_of(store, ord)? {
        Some(Name::Live(id)) => id,
        Some(Name::Erased) => format!("(erased #{ord})"),
        None => format!("(unknown #{ord})"),
    })
}

/// Parses a hook id of the node `node` (the store's identity): either
/// form, `hk_NODE_` + 16 hex digits or the older `hk_` + 16 hex digits. An
/// id another node minted is refused naming that node, never "not found":
/// its hook is in that node's store.
pub fn parse_hook_id(s: &str, node: Option<&NodeIdentity>) -> Result<HookId> {
    HookId::resolve(s, node).map_err(|e| match e {
        HookIdError::Malformed(_) => OpsError::BadRequest(format!(
            "{s:?} is not a hook id (hk_NODE_ and 16 hex digits, or hk_ and 16 hex digits)"
        )),
        other @ HookIdError::OtherNode { .. } => OpsError::Invalid {
            code: "other_node",
            message: other.to_string(),
        },
    })
}

/// One dead hook: every sink that dead-lettered it, with its delivery
/// history, and a bounded, redacted preview of the hook.
pub fn dlq_detail(store: &Store, who: &Principal, hook_id: &str) -> Result<DlqDetail> {
    let id = parse_hook_id(hook_id, store.node())?;
    let missing = || OpsError::NotFound(format!("no dead hook {hook_id}"));
    let rows = crate::replay::dead_rows_of(store, id.0)?;
    let Some(first) = rows.first() else {
        return Err(missing());
    };
    if !who.sees_ord(store, first.ord)? {
        return Err(missing());
    }
    let tenant = tenant_name(store, first.ord)?;
    let catalog = sinks::catalog(store)?;
    let mut dead = Vec::with_capacity(rows.len());
    for r in &rows {
        let d = queries::delivery(store, r.seq, r.sink)?;
        dead.push(DeadSink {
            sink: r.sink,
            sink_name: sinks::display(&catalog, &r.source_id, r.sink),
            dead_at: r.at,
            attempts: d.as_ref().map_or(0, |d| d.attempts),
            history: d
                .map(|d| {
                    d.history
                        .into_iter()
                        .map(|a| AttemptView {
                            at: a.at,
                            status: a.status,
                            error: a.error,
                        })
                        .collect()
                })
                .unwrap_or_default(),
        });
    }
    let hook = queries::hook(store, id.0)?.map(|env| {
        let p = crate::preview::build(&env);
        let (body_kind, body_preview, body_truncated) = match p.body {
            crate::preview::Body::Empty => ("empty", Vec::new(), false),
            crate::preview::Body::Text { text, truncated } => {
                ("text", text.lines().map(str::to_owned).collect(), truncated)
            }
            crate::preview::Body::Binary { hex, truncated } => ("binary", hex, truncated),
        };
        HookView {
            received_at: env.received_at,
            source: p.source,
            idempotency_key: p.idempotency_key,
            event_type: p.event_type,
            headers: p.headers,
            body_len: p.body_len,
            body_kind: body_kind.to_owned(),
            body_preview,
            body_truncated,
        }
    });
    Ok(DlqDetail {
        hook_id: id.public(store.node()),
        tenant,
        dead,
        hook,
    })
}

// Pauses, as reads: the write side (pause, resume) is crate::pauses.

/// Splits `source/sink` and resolves the sink (a name or a position)
/// against the store's sink catalog.
pub fn resolve_sink(store: &Store, name: &str) -> Result<SinkRef> {
    let Some((source, sink)) = name.split_once('/') else {
        return Err(OpsError::BadRequest(format!(
            "sink {name:?}: name a sink as SOURCE/SINK (the sink by its name or position), e.g. shop/0"
        )));
    };
    let catalog = sinks::catalog(store)?;
    match sinks::resolve(&catalog, source, sink) {
        Some(e) if e.dropped() => Err(OpsError::NotFound(format!(
            "sink {name:?} was dropped from the configuration: nothing is delivered to it, and \
             its dead rows are listed as {}",
            sinks::display(&catalog, &e.source, e.index)
        ))),
        Some(e) => Ok(SinkRef {
            source: e.source,
            sink: e.index,
        }),
        None => Err(OpsError::NotFound(format!(
            "no sink {name:?}: `ankusa sinks list` names the node's sinks"
        ))),
    }
}

/// A pause as the API shows it: its label names the sink by its name.
pub fn pause_view(pause: Pause, catalog: &[sinks::SinkEntry]) -> PauseView {
    PauseView {
        label: pause.scope.label(catalog),
        pause,
    }
}

/// Every pause the caller may see: an admin all of them; a tenant caller
/// those of its tenant and the node-wide sink pauses that hold its rows.
pub fn pauses_page(store: &Store, who: &Principal) -> Result<PausesPage> {
    let pauses = pauses::list(store)?
        .into_iter()
        .filter(|p| match (&who.tenant, &p.scope.tenant) {
            (None, _) | (Some(_), None) => true,
            (Some(own), Some(t)) => own == t,
        })
        .collect::<Vec<_>>();
    let catalog = sinks::catalog(store)?;
    let pauses = pauses
        .into_iter()
        .map(|p| pause_view(p, &catalog))
        .collect();
    Ok(PausesPage { pauses })
}

/// Which of `ids` are paused as a whole (a tenants page's PAUSED badges):
/// one read of the pauses, which are bounded ([`pauses::MAX_PAUSES`]).
pub fn paused_among<'a>(
    store: &Store,
    ids: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<String>> {
    let paused: std::collections::HashSet<String> = pauses::list(store)?
        .into_iter()
        .filter(|p| p.scope.sink.is_none())
        .filter_map(|p| p.scope.tenant)
        .collect();
    Ok(ids
        .into_iter()
        .filter(|t| paused.contains(*t))
        .map(str::to_owned)
        .collect())
}

/// The pauses that hold `tenant`'s rows: of the tenant, of a sink for it,
/// and of a sink for every tenant (a tenant detail's header).
pub fn holding(store: &Store, tenant: &str) -> Result<Vec<PauseView>> {
    let catalog = sinks::catalog(store)?;
    Ok(pauses::list(store)?
        .into_iter()
        .filter(|p| p.scope.tenant.as_deref().is_none_or(|t| t == tenant))
        .map(|p| pause_view(p, &catalog))
        .collect())
}
