//! The checked form of the file, [`Settings`]: the checks that span
//! several keys (duplicate ids, routes, sink names, archive paths, admin
//! tokens), each error located at the file's line and key, and the typed
//! values the rest of the daemon reads.

use super::{
    rotated, AdminSection, ArchiveSection, Config, ConfigError, DispatchSection, Expiring, Secret,
    SinkConfig, SourceConfig, MAX_FORWARD_HEADERS, MAX_SINKS, MAX_SOURCE_ID,
};
use ankusa_ops::access::AdminToken;
use ankusa_store::transitions::SinkSet;
use ankusa_store::NodeId;
use axum::http::HeaderName;
use std::collections::HashSet;
use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The admin API's settings.
#[derive(Debug, Clone, Default)]
pub struct AdminSettings {
    pub socket: bool,
    pub local_admin: bool,
    pub listen: Option<SocketAddr>,
    pub tokens: Vec<AdminToken>,
}

fn check_admin(a: AdminSection, text: &str, path: &Path) -> Result<AdminSettings, ConfigError> {
    let mut names = HashSet::new();
    let mut tokens = Vec::with_capacity(a.tokens.len());
    for spanned in a.tokens {
        let span = spanned.span();
        let t = spanned.into_inner();
        let fail = |m: String| located(text, path, Some(span.clone()), &m);
        let name_ok = !t.name.is_empty()
            && t.name.len() <= 64
            && t.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
        if !name_ok {
            return Err(fail(format!(
                "admin.tokens.name `{}`: 1 to 64 characters of A-Z a-z 0-9 - _ . @ (it is written to the audit log)",
                t.name
            )));
        }
        if !names.insert(t.name.clone()) {
            return Err(fail(format!(
                "admin.tokens.name `{}` is used twice",
                t.name
            )));
        }
        let Secret(tok) = t.token;
        if tok.len() < 16 || !tok.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(fail(format!(
                "admin token `{}`: admin.tokens.token must be at least 16 printable ASCII characters without spaces",
                t.name
            )));
        }
        if let Some(tenant) = &t.tenant {
            ankusa_store::tenants::validate_id(tenant).map_err(|e| {
                fail(format!(
                    "admin token `{}`: admin.tokens.tenant: {e}",
                    t.name
                ))
            })?;
        }
        tokens.push(AdminToken {
            name: t.name,
            digest: ankusa_ops::access::digest(tok.as_bytes()),
            tenant: t.tenant,
        });
    }
    let digests: HashSet<[u8; 32]> = tokens.iter().map(|t| t.digest).collect();
    if digests.len() != tokens.len() {
        return Err(ConfigError(format!(
            "{}: two admin tokens have the same secret: each caller needs its own (the audit log names them)",
            path.display()
        )));
    }
    if a.listen.is_some() && tokens.is_empty() {
        return Err(ConfigError(format!(
            "{}: admin.listen serves the admin API on TCP, which needs at least one [[admin.tokens]]",
            path.display()
        )));
    }
    Ok(AdminSettings {
        socket: a.socket,
        local_admin: a.local_admin,
        listen: a.listen,
        tokens,
    })
}

/// How a source finds the tenant of a hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenantRule {
    /// Every hook of the source belongs to this tenant (`default` when the
    /// source names none).
    Fixed(String),
    /// The tenant is in this request header, which is required.
    Header(HeaderName),
}

/// A source, checked and ready for the request path.
#[derive(Clone)]
pub struct Source {
    pub id: String,
    pub tenant: TenantRule,
    /// SHA-256 of each ingest token: compared in constant time against the
    /// digest of the presented one, so neither content nor length leaks.
    /// Empty: no token needed. Any unexpired one is accepted.
    pub tokens: Vec<Expiring<[u8; 32]>>,
    /// The decoded HMAC keys of the Standard Webhooks signing secrets.
    /// Empty: no signature needed. A signature by any unexpired one is
    /// accepted.
    pub signing_keys: Vec<Expiring<Vec<u8>>>,
    pub signature_tolerance: Duration,
    pub max_body: usize,
    /// Request headers stored with each hook (lowercase), content-type and
    /// webhook-id first.
    pub keep_headers: Vec<HeaderName>,
    /// Its share of the dispatcher's claims among the sources (the
    /// scheduler's group weight): the sources are served fairly first, their
    /// tenants second.
    pub weight: u32,
    /// Where a hook's event type is read; `None`: hooks have no type.
    pub event_type: Option<crate::routing::EventTypeFrom>,
    pub sinks: Vec<SinkConfig>,
    /// The configuration generation this copy belongs to. Whatever keeps
    /// the source (an ingest request from admission to its answer, a
    /// delivery attempt through its sink) keeps it alive, which is how a
    /// reload knows nothing admitted under an older generation is in flight
    /// (`crate::reload::Live::oldest_in_flight`).
    pub generation: Arc<Generation>,
}

/// A configuration generation, shared by every source of it.
#[derive(Debug)]
pub struct Generation(pub u64);

/// `scheme://host[:port]` of a sink's URL: what may be shown or stored of
/// it (a path or query may carry a secret). Empty for a URL that does not
/// parse, which the config check refuses.
pub fn endpoint(url: &str) -> String {
    reqwest::Url::parse(url)
        .map(|u| {
            let host = u.host_str().unwrap_or("");
            match u.port() {
                Some(p) => format!("{}://{host}:{p}", u.scheme()),
                None => format!("{}://{host}", u.scheme()),
            }
        })
        .unwrap_or_default()
}

impl Source {
    /// The positions of its sinks, tombstones left out.
    pub fn configured(&self) -> Vec<u16> {
        self.sinks
            .iter()
            .enumerate()
            .filter(|(_, k)| !k.dropped)
            .map(|(i, _)| u16::try_from(i).unwrap_or(u16::MAX))
            .collect()
    }

    /// The positions a new hook of this source owes rows to: every sink but
    /// the retired ones.
    pub fn ingest_sinks(&self) -> SinkSet {
        let n = u16::try_from(self.sinks.len()).unwrap_or(SinkSet::MAX);
        self.sinks
            .iter()
            .enumerate()
            .filter(|(_, k)| k.retired)
            .fold(SinkSet::first(n), |set, (i, _)| {
                set.without(u16::try_from(i).unwrap_or(u16::MAX))
            })
    }

    /// The positions a new hook of type `t` owes rows to: the sinks of
    /// [`Source::ingest_sinks`] that subscribe to it. Empty: the hook is
    /// unrouted.
    pub fn route(&self, t: Option<&str>) -> SinkSet {
        crate::routing::route(self.ingest_sinks(), t, |i| {
            self.sinks
                .get(usize::from(i))
                .and_then(|k| k.patterns.as_deref())
        })
    }

    /// The hook's event type from this request (none when the source does
    /// not route by type).
    pub fn event_type(
        &self,
        headers: &axum::http::HeaderMap,
        body: &[u8],
    ) -> Result<Option<String>, crate::routing::EventTypeError> {
        match &self.event_type {
            Some(from) => crate::routing::extract(from, headers, body),
            None => Ok(None),
        }
    }

    /// The source's sinks as the store's catalog records them: the name (or
    /// the position), the URL's scheme, host and port only and a digest of
    /// the whole URL, and whether it is retired or a tombstone.
    pub fn catalog(&self) -> Vec<ankusa_store::sinks::SinkEntry> {
        use ankusa_store::sinks::{SinkEntry, SinkState};
        self.sinks
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let state = match (k.dropped, k.retired) {
                    (true, _) => SinkState::Dropped,
                    (false, true) => SinkState::Retired,
                    (false, false) => SinkState::Live,
                };
                SinkEntry {
                    source: self.id.clone(),
                    index: u16::try_from(i).unwrap_or(u16::MAX),
                    name: k.name.clone().unwrap_or_else(|| i.to_string()),
                    endpoint: endpoint(&k.url),
                    state,
                    url_digest: (!k.dropped).then(|| url_digest(&k.url)),
                }
            })
            .collect()
    }
}

/// SHA-256 of a sink's URL: what the catalog keeps to recognise the same
/// endpoint under a new name, without keeping a URL that may carry a
/// secret.
pub fn url_digest(url: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(url.as_bytes()).into()
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Source")
            .field("id", &self.id)
            .field("tenant", &self.tenant)
            .field("tokens", &self.tokens)
            .field("signing_secrets", &self.signing_keys)
            .field("weight", &self.weight)
            .field("sinks", &self.sinks.len())
            .finish()
    }
}

/// The writer's knobs.
#[derive(Debug, Clone)]
pub struct WriterSettings {
    pub queue: usize,
    pub queue_bytes: usize,
    pub max_batch: usize,
    pub max_batch_bytes: usize,
    pub linger: Duration,
    pub dedupe_ttl: Duration,
    pub sweep_interval: Duration,
    pub sweep_batch: usize,
    pub tenants_max: u32,
    /// Record an archive obligation with every accepted hook.
    pub archive: bool,
}

/// Everything the daemon needs, checked.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config_path: PathBuf,
    pub store_path: PathBuf,
    /// `store.cache`: RocksDB's memory budget, in bytes.
    pub store_cache: usize,
    /// `node.id`, when configured.
    pub node_id: Option<NodeId>,
    pub listen: SocketAddr,
    pub max_body: usize,
    pub body_timeout: Duration,
    pub max_requests: usize,
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub shutdown_timeout: Duration,
    pub metrics: bool,
    pub writer: WriterSettings,
    pub dispatch: DispatchSettings,
    pub archive: ArchiveSettings,
    pub admin: AdminSettings,
    pub sources: Vec<Source>,
    /// `[tenants]` weight, share, cap and rate: what a tenant without a
    /// policy of its own gets (live: a reload changes them).
    pub tenant_defaults: ankusa_store::policy::Policy,
    /// `[cluster]`: this node is a member of a replicated cluster.
    pub cluster: Option<super::ClusterSettings>,
}

impl Settings {
    /// Reads and checks a config file.
    pub fn load(path: &Path) -> Result<Settings, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config file {}: {e}", path.display())))?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::parse(&text, path, &base)
    }

    /// Parses config text; `path` is only used in messages, `base` resolves
    /// a relative store path.
    pub fn parse(text: &str, path: &Path, base: &Path) -> Result<Settings, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| {
            let msg = e.message().trim_end().to_owned();
            located(text, path, e.span(), &msg)
        })?;
        Self::check(cfg, text, path, base)
    }

    fn check(cfg: Config, text: &str, path: &Path, base: &Path) -> Result<Settings, ConfigError> {
        let err = |span: Range<usize>, msg: String| located(text, path, Some(span), &msg);
        if cfg.sources.is_empty() {
            return Err(ConfigError(format!(
                "{}: no sources: add at least one [[sources]] table (see ankusa.example.toml)",
                path.display()
            )));
        }
        // Every source, the archive and the admin section are checked even
        // after one fails, and all their errors are reported together (a
        // syntax or type error stops the parse before this, at the first).
        let mut errors = Vec::new();
        let mut ids = HashSet::new();
        let mut sources = Vec::with_capacity(cfg.sources.len());
        for spanned in cfg.sources {
            let span = spanned.span();
            let s = spanned.into_inner();
            match check_source(s, &mut ids, cfg.http.max_body.0) {
                Ok(s) => sources.push(s),
                Err(m) => errors.push(err(span.clone(), m)),
            }
        }
        let store_path = if cfg.store.path.is_absolute() {
            cfg.store.path
        } else {
            base.join(cfg.store.path)
        };
        let archive = match &cfg.archive {
            Some(a) => check_archive(a.get_ref(), base).map_err(|m| err(a.span(), m)),
            None => check_archive(&ArchiveSection::default(), base).map_err(ConfigError),
        };
        let admin = check_admin(cfg.admin, text, path);
        let (archive, admin) = match (archive, admin) {
            (Ok(a), Ok(b)) if errors.is_empty() => (a, b),
            (a, b) => {
                errors.extend(a.err());
                errors.extend(b.err());
                return Err(ConfigError(
                    errors
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("\n"),
                ));
            }
        };
        let cluster = match &cfg.cluster {
            Some(c) => Some(
                super::cluster::check(c.get_ref(), &store_path, base)
                    .map_err(|m| err(c.span(), format!("[cluster] {m}")))?,
            ),
            None => None,
        };
        let w = cfg.writer;
        let dispatch = cfg.dispatch.settings();
        let tenant_defaults = cfg.tenants.defaults();
        tenant_defaults
            .check()
            .map_err(|m| ConfigError(format!("{}: [tenants] {m}", path.display())))?;
        Ok(Settings {
            config_path: path.to_path_buf(),
            store_path,
            store_cache: to_usize(cfg.store.cache.0),
            node_id: cfg.node.id,
            listen: cfg.http.listen,
            max_body: usize::try_from(cfg.http.max_body.0).unwrap_or(usize::MAX),
            body_timeout: cfg.http.body_timeout.0,
            max_requests: to_usize(cfg.http.max_requests.0),
            max_connections: to_usize(cfg.http.max_connections.0),
            header_timeout: cfg.http.header_timeout.0,
            shutdown_timeout: cfg.http.shutdown_timeout.0,
            metrics: cfg.http.metrics,
            writer: WriterSettings {
                queue: to_usize(w.queue.0),
                queue_bytes: to_usize(w.queue_bytes.0),
                max_batch: to_usize(w.max_batch.0),
                max_batch_bytes: to_usize(w.max_batch_bytes.0),
                linger: w.linger.0,
                dedupe_ttl: cfg.ingest.dedupe_ttl.0,
                sweep_interval: cfg.ingest.dedupe_sweep_interval.0,
                sweep_batch: to_usize(cfg.ingest.dedupe_sweep_batch.0),
                tenants_max: u32::try_from(cfg.tenants.max.0).unwrap_or(u32::MAX - 1),
                archive: archive.enabled,
            },
            dispatch,
            archive,
            admin,
            sources,
            tenant_defaults,
            cluster,
        })
    }
}

/// `dir` is required only when the archive is on: an obligation nobody can
/// settle would keep every hook forever.
fn check_archive(a: &ArchiveSection, base: &Path) -> Result<ArchiveSettings, String> {
    let dir =
        match (&a.dir, a.enabled) {
            (Some(d), _) if d.as_os_str().is_empty() => {
                return Err("archive.dir must not be empty".into())
            }
            (Some(d), _) if d.is_absolute() => d.clone(),
            (Some(d), _) => base.join(d),
            (None, true) => return Err(
                "archive.enabled = true needs archive.dir (the directory the archive files go to)"
                    .into(),
            ),
            (None, false) => PathBuf::new(),
        };
    Ok(ArchiveSettings {
        enabled: a.enabled,
        dir,
        max_file_bytes: a.max_file_bytes.0,
        max_file_age: a.max_file_age.0,
        interval: a.interval.0,
        batch: to_usize(a.batch.0),
    })
}

pub(super) fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

fn check_source(
    s: SourceConfig,
    ids: &mut HashSet<String>,
    http_max_body: u64,
) -> Result<Source, String> {
    let id = s.id;
    let id_ok = !id.is_empty()
        && id.len() <= MAX_SOURCE_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if !id_ok {
        return Err(format!(
            "sources.id `{id}`: must be 1 to {MAX_SOURCE_ID} characters of A-Z a-z 0-9 - _ . (it is a URL path segment)"
        ));
    }
    if !ids.insert(id.clone()) {
        return Err(format!("sources.id `{id}` is used by two sources"));
    }
    let tenant = match (s.tenant, s.tenant_header) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "source `{id}`: sources.tenant and sources.tenant_header are exclusive (a fixed tenant, or a header that names it)"
            ))
        }
        (Some(t), None) => {
            ankusa_store::tenants::validate_id(&t).map_err(|e| format!("source `{id}`: sources.tenant: {e}"))?;
            TenantRule::Fixed(t)
        }
        (None, Some(h)) => TenantRule::Header(
            header_name(&h).map_err(|m| format!("source `{id}`: sources.tenant_header: {m}"))?,
        ),
        (None, None) => TenantRule::Fixed(ankusa_store::tenants::DEFAULT_TENANT.to_owned()),
    };
    let many: Vec<_> = s
        .tokens
        .iter()
        .map(|t| (t.token.clone(), t.expires))
        .collect();
    let tokens = rotated("token", s.token.as_ref(), &many, |t| {
        if t.len() < 8 || !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("must be at least 8 printable ASCII characters without spaces".into());
        }
        Ok(ankusa_ops::access::digest(t.as_bytes()))
    })
    .map_err(|m| format!("source `{id}`: sources.{m}"))?;
    let many: Vec<_> = s
        .signing_secrets
        .iter()
        .map(|k| (k.secret.clone(), k.expires))
        .collect();
    let signing_keys = rotated(
        "signing_secret",
        s.signing_secret.as_ref(),
        &many,
        crate::signature::decode_secret,
    )
    .map_err(|m| format!("source `{id}`: sources.{m}"))?;
    if s.forward_headers.len() > MAX_FORWARD_HEADERS {
        return Err(format!(
            "source `{id}`: sources.forward_headers lists {} headers, the limit is {MAX_FORWARD_HEADERS}",
            s.forward_headers.len()
        ));
    }
    let mut keep_headers = vec![
        HeaderName::from_static("content-type"),
        HeaderName::from_static("webhook-id"),
    ];
    for h in &s.forward_headers {
        let name =
            header_name(h).map_err(|m| format!("source `{id}`: sources.forward_headers: {m}"))?;
        if !keep_headers.contains(&name) {
            keep_headers.push(name);
        }
    }
    if s.sinks.is_empty() || s.sinks.len() > MAX_SINKS {
        return Err(format!(
            "source `{id}`: needs 1 to {MAX_SINKS} [[sources.sinks]] (one delivery row per sink), has {}",
            s.sinks.len()
        ));
    }
    let mut sinks = s.sinks;
    let mut names = HashSet::new();
    for (i, sink) in sinks.iter_mut().enumerate() {
        if let Some(n) = &sink.name {
            let ok = !n.is_empty()
                && n.len() <= MAX_SOURCE_ID
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                && !n.bytes().all(|b| b.is_ascii_digit());
            if !ok {
                return Err(format!(
                    "source `{id}`: sources.sinks[{i}].name `{n}`: must be 1 to {MAX_SOURCE_ID} characters of A-Z a-z 0-9 - _ . and not all digits (a position names the sink already)"
                ));
            }
            if !names.insert(n.clone()) {
                return Err(format!(
                    "source `{id}`: sources.sinks[{i}].name `{n}` is used by two sinks of the source"
                ));
            }
        }
        let many: Vec<_> = sink
            .signing_secrets
            .iter()
            .map(|k| (k.secret.clone(), k.expires))
            .collect();
        sink.signing_keys = rotated(
            "signing_secret",
            sink.signing_secret.as_ref(),
            &many,
            crate::signature::decode_secret,
        )
        .map_err(|m| format!("source `{id}`: sources.sinks[{i}].{m}"))?;
        let url = reqwest::Url::parse(&sink.url)
            .map_err(|e| format!("source `{id}`: sources.sinks[{i}].url `{}`: {e}", sink.url))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(format!(
                "source `{id}`: sources.sinks[{i}].url must be http:// or https://"
            ));
        }
        if sink.backoff_max.0 < sink.backoff_initial.0 {
            return Err(format!(
                "source `{id}`: sources.sinks[{i}].backoff_max is shorter than backoff_initial"
            ));
        }
        sink.patterns = crate::routing::check_events(sink.events.as_deref())
            .map_err(|m| format!("source `{id}`: sources.sinks[{i}].{m}"))?;
        if sink.patterns.is_some() && s.event_type.is_none() {
            return Err(format!(
                "source `{id}`: sources.sinks[{i}].events needs the source's event_type (where a hook's type is: {{ header = \"...\" }} or {{ json = \"/type\" }})"
            ));
        }
        if let Some(b) = &sink.breaker {
            if b.failures.is_none() && b.ratio.is_none() {
                return Err(format!(
                    "source `{id}`: sources.sinks[{i}].breaker needs a rule: failures (consecutive), ratio (over window), or both"
                ));
            }
            if b.open_max.0 < b.open_for.0 {
                return Err(format!(
                    "source `{id}`: sources.sinks[{i}].breaker.open_max is shorter than open_for"
                ));
            }
        }
    }
    let event_type = s
        .event_type
        .as_ref()
        .map(crate::routing::EventTypeFrom::check)
        .transpose()
        .map_err(|m| format!("source `{id}`: sources.{m}"))?;
    Ok(Source {
        id,
        event_type,
        tenant,
        tokens,
        signing_keys,
        signature_tolerance: s.signature_tolerance.0,
        max_body: to_usize(s.max_body.map_or(http_max_body, |m| m.0)),
        keep_headers,
        weight: u32::try_from(s.weight.0).unwrap_or(1000),
        sinks,
        generation: Arc::new(Generation(0)),
    })
}

fn header_name(h: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(h.trim().as_bytes())
        .map_err(|_| format!("`{h}` is not a valid HTTP header name"))
}

/// Renders an error at `span` of `text` as `FILE:LINE: key `a.b`: message`
/// followed by the line itself. The key is read back from the file (the
/// line's `key =` and the table header above it), since serde's errors do
/// not carry the path.
fn located(text: &str, path: &Path, span: Option<Range<usize>>, msg: &str) -> ConfigError {
    let Some(span) = span else {
        return ConfigError(format!("{}: {msg}", path.display()));
    };
    let start = span.start.min(text.len());
    let line_no = text[..start].bytes().filter(|&b| b == b'\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("");
    let key = key_at(text, line_no);
    let key = key.map(|k| format!(" key `{k}`:")).unwrap_or_default();
    ConfigError(format!(
        "config error in {} at line {line_no}:{key} {msg}\n  {line_no} | {line}",
        path.display()
    ))
}

/// The dotted key written on line `line_no` (1-based), prefixed by the
/// nearest table header above it. `None` when the line holds no `key =`
/// and is no table header.
fn key_at(text: &str, line_no: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let line = lines.get(line_no.checked_sub(1)?)?.trim();
    let header = |l: &str| -> Option<String> {
        let l = l.trim();
        let inner = l
            .strip_prefix("[[")
            .and_then(|r| r.split("]]").next())
            .or_else(|| l.strip_prefix('[').and_then(|r| r.split(']').next()))?;
        Some(inner.trim().to_owned())
    };
    if let Some(h) = header(line) {
        return Some(h);
    }
    let key = line.split('=').next()?.trim();
    if key.is_empty() || !line.contains('=') || key.starts_with('#') {
        return None;
    }
    let table = lines[..line_no - 1].iter().rev().find_map(|l| header(l));
    Some(match table {
        Some(t) => format!("{t}.{key}"),
        None => key.to_owned(),
    })
}

/// `[dispatch]`, checked.
#[derive(Debug, Clone)]
pub struct DispatchSettings {
    pub enabled: bool,
    pub tick: Duration,
    /// A finished delivery starts a tick at once (else only the period does).
    pub refill: bool,
    /// Deliveries in flight at once, node-wide.
    pub max_inflight: usize,
    /// Body bytes of the deliveries in flight at once, node-wide (one row may
    /// overdraw it, see `Limits::bytes`).
    pub max_inflight_bytes: u64,
    /// Deliveries in flight at once per tenant (the scheduler's cap).
    pub per_tenant: u32,
    /// Deliveries in flight at once per sink.
    pub per_sink: usize,
    /// Rows claimed per tick at most.
    pub tick_rows: u32,
    /// Bytes claimed per tick at most (one oversized row may go alone).
    pub tick_bytes: u64,
    /// Active tenants read per tick at most.
    pub scan_tenants: usize,
    /// Head rows read per tenant per tick at most.
    pub scan_rows: usize,
    pub drain_timeout: Duration,
    pub reclaim_interval: Duration,
    pub reclaim_batch: usize,
}

impl DispatchSettings {
    /// The most rows one tenant may have in flight: its cap, or more when
    /// it borrows slots nobody else is waiting for, up to one sink's own
    /// concurrency bound (and never past the node's).
    pub fn tenant_ceiling(&self) -> u32 {
        let sink = u32::try_from(self.per_sink.min(self.max_inflight)).unwrap_or(u32::MAX);
        sink.max(self.per_tenant)
    }

    /// The scheduler's work-conserving rule: borrow up to the ceiling,
    /// leaving `per_tenant` of each tick's free slots for a tenant that
    /// arrives meanwhile, so it is served on the next tick.
    pub fn spare(&self) -> ankusa_fairness::Spare {
        ankusa_fairness::Spare {
            ceiling: self.tenant_ceiling(),
            reserve: self.per_tenant,
        }
    }
}

impl Default for DispatchSettings {
    /// The defaults of `[dispatch]`, written once in the config.
    fn default() -> Self {
        DispatchSection::default().settings()
    }
}

/// `[archive]`, checked.
#[derive(Debug, Clone)]
pub struct ArchiveSettings {
    pub enabled: bool,
    pub dir: PathBuf,
    /// Roll once the current file holds this many bytes on disk.
    pub max_file_bytes: u64,
    /// Roll once the current file is this old.
    pub max_file_age: Duration,
    pub interval: Duration,
    /// Hooks per synced write.
    pub batch: usize,
}
