//! Command-line definitions (names are fixed by the design brief: scripts
//! depend on them) and dispatch.

mod backend;
mod config_cmd;
mod dlq_cmd;
mod fleet_cmd;
mod migrate_cmd;
mod node_cmd;
mod pause_cmd;
mod policy_cmd;
mod store_cmd;
mod tenants_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use color_eyre::eyre::Result;

#[derive(Debug, Parser)]
#[command(
    name = "ankusa",
    version,
    about = "A durable, multi-tenant webhook relay with a fair dispatcher"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect, check and generate stores.
    #[command(subcommand)]
    Store(StoreCommand),
    /// Tenants and their counters; purge a tenant. Asks the running daemon
    /// through its admin socket, or reads the store when none runs.
    #[command(subcommand)]
    Tenants(TenantsCommand),
    /// The dead-letter queue: list, show, replay (through the daemon when
    /// one runs, else on the store directly).
    #[command(subcommand)]
    Dlq(DlqCommand),
    /// The node's sinks; pause and resume one (through the daemon when one
    /// runs, else on the store directly).
    #[command(subcommand)]
    Sinks(SinksCommand),
    /// The node: drain it before taking it out of a fleet, undrain it, or
    /// show whether it drains and what it still owes.
    #[command(subcommand)]
    Node(NodeCommand),
    /// Self-asserting benchmarks (exit 1 when the assertion fails).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// The configuration file: check it (and what a reload would change on
    /// the daemon serving its store), or reload it without a restart.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Run the daemon: accept webhooks over HTTP and commit them durably
    /// (docs/configuration.md, docs/delivery.md).
    Serve {
        /// Configuration file (default: ./ankusa.toml).
        #[arg(long, value_name = "FILE", env = "ANKUSA_CONFIG")]
        config: Option<PathBuf>,
    },
    /// The operator console: follows a running daemon (FOLLOW), or opens the
    /// store read-only (READ-ONLY), or with --write and no daemon (WRITE).
    Console {
        /// Store directory (never created by the console).
        #[arg(
            long,
            env = "ANKUSA_STORE",
            value_name = "DIR",
            required_unless_present = "fleet"
        )]
        store: Option<PathBuf>,
        /// One console over every node of this fleet file, through their
        /// admin APIs (docs/fleet.md), instead of one store.
        #[arg(long, value_name = "FLEET.toml", conflicts_with_all = ["read_only", "write"])]
        fleet: Option<PathBuf>,
        /// Open read-only even when a daemon runs (no catch-up).
        #[arg(long, conflicts_with = "write")]
        read_only: bool,
        /// Open as the store's writer when no daemon holds it, enabling the
        /// guarded purge and replay actions.
        #[arg(long)]
        write: bool,
        /// How often the screen's data is refreshed (a human duration).
        #[arg(long, default_value = "2s")]
        refresh: humantime::Duration,
        /// Leave the mouse to the terminal: no clicks or wheel in the
        /// console, the terminal's own selection as usual.
        #[arg(long, env = "ANKUSA_NO_MOUSE", value_parser = clap::builder::FalseyValueParser::new())]
        no_mouse: bool,
        #[command(flatten)]
        admin: AdminArg,
    },
    /// Print the shell completion script for SHELL (bash, zsh, fish,
    /// elvish, powershell) on stdout, e.g. `ankusa completions bash >
    /// /etc/bash_completion.d/ankusa`.
    Completions { shell: clap_complete::Shell },
    /// Print the man page of ankusa on stdout (roff), or with --out write
    /// one page per command (ankusa.1, ankusa-store-info.1, ...) into DIR.
    Man {
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// The whole system on this machine: a daemon on a fresh store, four
    /// loopback sinks, a load generator, and the console beside them
    /// (docs/demo.md).
    Demo {
        /// Store directory (kept); default: a temporary one, removed at exit.
        #[arg(long, value_name = "DIR")]
        store: Option<PathBuf>,
        /// Run headless for --duration and print a summary.
        #[arg(long)]
        no_console: bool,
        /// How long the load generator runs (a human duration).
        #[arg(long, default_value = "60s")]
        duration: humantime::Duration,
        /// Seed of the load generator's and the sinks' random choices.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The summary as JSON (documented in docs/demo.md); needs --no-console.
        #[arg(long, requires = "no_console")]
        json: bool,
        /// Keep the temporary store (--store is always kept).
        #[arg(long)]
        keep: bool,
    },
}

/// Where the store is: `--store`, else `ANKUSA_STORE`.
#[derive(Debug, Args, Clone)]
pub struct StoreArg {
    /// Store directory.
    #[arg(long, env = "ANKUSA_STORE", value_name = "DIR")]
    pub store: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Format, node counters, tenants, active tenants, oldest-due age, keys per family.
    Info {
        #[command(flatten)]
        store: StoreArg,
        /// Machine-readable output (documented in docs/cli.md).
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Compare counters with a fold of every family, check markers and ordinals.
    /// Exit 0 when consistent, 1 with the mismatches listed.
    Check {
        #[command(flatten)]
        store: StoreArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// A digest of the store's logical content (every family's keys and
    /// values; not RocksDB's files, not the replication bookkeeping), so two
    /// replicas at the same applied index can be compared (docs/cluster.md).
    Digest {
        #[command(flatten)]
        store: StoreArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Write a realistic store: format 3 through the real transitions, or
    /// format 2 (the previous release's layout) as input for the migration.
    Fixture {
        /// Store format to write: 3, or 2 for the upgrade path.
        #[arg(long, value_parser = clap::value_parser!(u32).range(2..=3))]
        format: u32,
        /// Directory to create (must not exist or be empty).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Tenants, `default` and `dead-only` included.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(2..))]
        tenants: u32,
        /// Delivery rows to write.
        #[arg(long, default_value_t = 10_000)]
        rows: u64,
        /// Seed of every random choice.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Upgrade a format 2 store to format 3 (resumable; see docs/deployment.md).
    Migrate {
        #[command(flatten)]
        store: StoreArg,
        /// Show the step and the rows it would move, change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Take a checkpoint backup into this (new) directory first.
        #[arg(long, value_name = "DIR")]
        backup: Option<PathBuf>,
        /// Do not ask for confirmation (for scripts).
        #[arg(long)]
        yes: bool,
        /// Skip the `store check` that runs after the migration.
        #[arg(long)]
        no_check: bool,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// On a stopped store: quarantine due rows that do not decode, put back
    /// missing markers, bring every counter to the fold, give hooks nothing
    /// owes a reclaim marker. Afterwards `store check` passes.
    Repair {
        #[command(flatten)]
        store: StoreArg,
        /// Print exactly what it would change, change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Rows moved aside because they did not decode.
    #[command(subcommand)]
    Quarantine(QuarantineCommand),
    /// Write a consistent copy of the store (a RocksDB checkpoint): with
    /// `--to`, a named backup taken beside a running daemon (or on the
    /// stopped store), then the oldest beyond `--keep` deleted; with
    /// `--out`, into one new directory, on a stopped store of any format.
    Backup {
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Directory of backups: the backup goes into a new directory in it
        /// named after the time and the node.
        #[arg(long, value_name = "BACKUPS", required_unless_present = "out")]
        to: Option<PathBuf>,
        /// With --to: keep this node's newest N backups there, delete the
        /// older ones (only this node's complete backups are counted).
        #[arg(long, value_name = "N", requires = "to", value_parser = clap::value_parser!(u64).range(1..))]
        keep: Option<u64>,
        /// Directory to create for the copy (a stopped store only; any
        /// format, as before a migration).
        #[arg(long, value_name = "DIR", conflicts_with_all = ["to", "keep"])]
        out: Option<PathBuf>,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Copy a backup into a new or empty store directory (no daemon may
    /// hold it); the node identity comes with it.
    Restore {
        /// The backup's directory (one `store backup --to` wrote).
        #[arg(long, value_name = "BACKUP")]
        from: PathBuf,
        #[command(flatten)]
        store: StoreArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum QuarantineCommand {
    /// List quarantined rows (key, tenant ordinal, when, why), oldest key first.
    List {
        #[command(flatten)]
        store: StoreArg,
        /// Rows to print at most.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Drop quarantined rows for good, with their delivery rows (stopped
    /// store only; audited).
    Drop {
        #[command(flatten)]
        store: StoreArg,
        /// Keys (hex, as `list` prints them) to drop.
        #[arg(value_name = "KEY", required_unless_present = "all")]
        keys: Vec<String>,
        /// Drop every quarantined row.
        #[arg(long, conflicts_with = "keys")]
        all: bool,
        /// Say what would be dropped, change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Do not ask for confirmation (for scripts).
        #[arg(long)]
        yes: bool,
    },
}

/// How to reach a daemon's admin API.
#[derive(Debug, Args)]
pub struct AdminArg {
    /// Admin API bearer token (default: none; a local user is an admin on
    /// the socket when the daemon allows it).
    #[arg(long, env = "ANKUSA_ADMIN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum TenantsCommand {
    /// Tenants with their counters (counters only, never a fold); with
    /// --fleet, every node's, with a node column and the fleet's totals.
    List {
        /// Store directory.
        #[arg(
            long,
            env = "ANKUSA_STORE",
            value_name = "DIR",
            required_unless_present = "fleet"
        )]
        store: Option<PathBuf>,
        /// Every node of this fleet file instead of one store
        /// (docs/fleet.md); exit 4 when a node does not answer.
        #[arg(long, value_name = "FLEET.toml", conflicts_with_all = ["cursor", "after"])]
        fleet: Option<PathBuf>,
        #[command(flatten)]
        admin: AdminArg,
        /// Sort by a counter, largest first (default: by ordinal).
        #[arg(long, value_parser = ["pending", "scheduled", "inflight", "dead", "bytes", "archive_pending"])]
        sort: Option<String>,
        /// Tenants to show (1 to 1000).
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Continue after this cursor (printed as `more: --cursor ...`).
        #[arg(long)]
        cursor: Option<String>,
        /// With ordinal order: start after this ordinal (the same as
        /// `--cursor ORD`).
        #[arg(long, conflicts_with_all = ["sort", "cursor"])]
        after: Option<u32>,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// One tenant: counters, oldest due row, latest dead rows.
    Show {
        /// Tenant id.
        tenant: String,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Delete a tenant's due rows and/or dead rows (never inflight ones).
    /// Prints the dry-run count and asks for the tenant's name unless --yes.
    Purge {
        /// Tenant id.
        tenant: String,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// What to delete: pending (due rows: first attempts and retries),
        /// dead, or both as `pending,dead`.
        #[arg(long, value_delimiter = ',', required = true)]
        kinds: Vec<String>,
        /// Only count what would be deleted (audited too).
        #[arg(long)]
        dry_run: bool,
        /// Do not ask for confirmation (for scripts).
        #[arg(long)]
        yes: bool,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Pause a tenant (or one sink for it): its rows stay queued and are not
    /// delivered until it is resumed. Nothing is lost; inflight deliveries
    /// finish.
    Pause {
        /// Tenant id.
        tenant: String,
        #[command(flatten)]
        scope: SinkScope,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Resume a paused tenant (or one sink for it): its rows are due at once.
    Resume {
        /// Tenant id.
        tenant: String,
        #[command(flatten)]
        scope: SinkScope,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// A tenant's policy (weight, share, cap, rate) over the defaults of
    /// `[tenants]`: show, set or clear it. The dispatcher applies a change
    /// on its next tick; setting and clearing need an admin and are
    /// audited.
    #[command(subcommand)]
    Policy(PolicyCommand),
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// What is set for the tenant, and the daemon's defaults.
    Show {
        /// Tenant id.
        tenant: String,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Set fields of the tenant's policy; fields not named keep what they
    /// had.
    Set {
        /// Tenant id.
        tenant: String,
        #[command(flatten)]
        fields: PolicyFields,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Remove the tenant's policy: the defaults apply again.
    Clear {
        /// Tenant id.
        tenant: String,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
}

/// The fields of a tenant policy, as flags.
#[derive(Debug, Args, Clone)]
pub struct PolicyFields {
    /// Its share within its source's group (1 to 1000).
    #[arg(long, value_name = "N")]
    pub weight: Option<u32>,
    /// In-flight slots guaranteed to it before anyone borrows.
    #[arg(long, value_name = "N")]
    pub share: Option<u32>,
    /// Deliveries in flight at most, borrowing included.
    #[arg(long, value_name = "N")]
    pub cap: Option<u32>,
    /// Deliveries started per second at most: 50/s, 30/m, 10/h.
    #[arg(long, value_name = "N/s")]
    pub rate: Option<ankusa_store::policy::Rate>,
}

#[derive(Debug, Subcommand)]
pub enum LimitCommand {
    /// What is set for the sink.
    Show {
        /// SOURCE/SINK (the sink by name or position).
        sink: String,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Set the sink's limits; a limit not named keeps what it had.
    Set {
        /// SOURCE/SINK (the sink by name or position).
        sink: String,
        /// Deliveries to it in flight at most (below `[dispatch] per_sink`).
        #[arg(long, value_name = "N")]
        max_in_flight: Option<u32>,
        /// Requests started per second at most: 50/s, 30/m, 10/h.
        #[arg(long, value_name = "N/s")]
        rate: Option<ankusa_store::policy::Rate>,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Remove the limits set at run time: the sink's configuration applies.
    Clear {
        /// SOURCE/SINK (the sink by name or position).
        sink: String,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
}

/// An optional sink, to narrow a tenant's pause to one sink.
#[derive(Debug, Args, Clone)]
pub struct SinkScope {
    /// Only this sink, as SOURCE/SINK (the sink by name or position).
    #[arg(long, value_name = "SOURCE/SINK")]
    pub sink: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Check the file (every key, its range, with file, line and key on an
    /// error; no store or port is touched), then, when a daemon serves its
    /// store, print what a reload would change, or why it would be refused
    /// (exit 1).
    Check {
        /// Configuration file (default: ./ankusa.toml).
        #[arg(long, value_name = "FILE", env = "ANKUSA_CONFIG")]
        config: Option<PathBuf>,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Make the daemon serving the file's store re-read it and apply it,
    /// whole or not at all (as SIGHUP does), and print the changes.
    Reload {
        /// Configuration file (default: ./ankusa.toml); the daemon re-reads
        /// its own file, which should be this one.
        #[arg(long, value_name = "FILE", env = "ANKUSA_CONFIG")]
        config: Option<PathBuf>,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// Start draining: `/healthz` answers 503 so the load balancer stops
    /// sending; the node delivers what it holds. `--wait` returns when it
    /// owes nothing (dead rows stay).
    Drain {
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Wait until nothing is pending, scheduled or inflight.
        #[arg(long)]
        wait: bool,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Stop draining: `/healthz` answers 200 again.
    Undrain {
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Whether the node drains and what it still owes.
    Status {
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum SinksCommand {
    /// Every sink of the node (the configuration the daemon last booted
    /// with) and its pauses.
    List {
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// One sink and its pauses.
    Show {
        /// SOURCE/SINK (the sink by name or position).
        sink: String,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Pause a sink for every tenant: its rows stay queued (parked) and are
    /// not delivered until it is resumed.
    Pause {
        /// SOURCE/SINK (the sink by name or position).
        sink: String,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Resume a paused sink: its parked rows are due at once.
    Resume {
        /// SOURCE/SINK (the sink by name or position).
        sink: String,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// A sink's limits set at run time (max_in_flight, rate): show, set
    /// or clear them. Applied on the dispatcher's next tick; admin only,
    /// audited.
    #[command(subcommand)]
    Limit(LimitCommand),
}

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// Dead rows, newest first: the node's, or one tenant's; with --fleet,
    /// every node's, merged, with a node column.
    List {
        /// Store directory.
        #[arg(
            long,
            env = "ANKUSA_STORE",
            value_name = "DIR",
            required_unless_present = "fleet"
        )]
        store: Option<PathBuf>,
        /// Every node of this fleet file instead of one store
        /// (docs/fleet.md); exit 4 when a node does not answer.
        #[arg(long, value_name = "FLEET.toml", conflicts_with = "cursor")]
        fleet: Option<PathBuf>,
        #[command(flatten)]
        admin: AdminArg,
        /// One tenant's DLQ (a scan of its rows only).
        #[arg(long)]
        tenant: Option<String>,
        /// Oldest first (what has waited longest) instead of newest first.
        #[arg(long)]
        oldest: bool,
        /// Only rows of hooks whose event type matches this pattern: a type
        /// (`customer.created`) or a prefix and `*` (`invoice.*`). A bounded
        /// walk of 2,000 rows a page: a short page prints `more: --cursor`.
        #[arg(long, value_name = "PATTERN")]
        event_type: Option<String>,
        /// Rows to show (1 to 1000).
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Continue after this cursor (printed as `more: --cursor ...`).
        #[arg(long)]
        cursor: Option<String>,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// One dead hook: its delivery history per sink and a redacted preview.
    Show {
        /// Hook id (`hk_NODE_` and 16 hex digits, or the older `hk_` and 16
        /// hex digits).
        id: String,
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Make dead rows due again: by hook ids, by tenant, by dead-letter
    /// time, or a tenant within a time range. Prints the dry-run count and
    /// asks unless --yes.
    Replay {
        #[command(flatten)]
        store: StoreArg,
        #[command(flatten)]
        admin: AdminArg,
        /// Hook ids, each with every dead sink (repeat, or comma-separated).
        #[arg(long = "id", value_delimiter = ',', conflicts_with_all = ["tenant", "since", "from", "until"])]
        ids: Vec<String>,
        /// Dead rows, each one hook's sink: HOOK_ID:SINK as `dlq list`
        /// shows them (repeat, or comma-separated).
        #[arg(long = "row", value_delimiter = ',', conflicts_with_all = ["tenant", "since", "from", "until"])]
        rows: Vec<String>,
        /// One tenant's dead rows (all of them, or within --since/--from/--until).
        #[arg(long)]
        tenant: Option<String>,
        /// Rows dead-lettered within this long ago (a human duration: 15m, 2h).
        #[arg(long, conflicts_with = "from")]
        since: Option<humantime::Duration>,
        /// Rows dead-lettered at or after this time (RFC 3339).
        #[arg(long)]
        from: Option<humantime::Timestamp>,
        /// Rows dead-lettered before this time (RFC 3339).
        #[arg(long)]
        until: Option<humantime::Timestamp>,
        /// Only count what would be replayed (audited too).
        #[arg(long)]
        dry_run: bool,
        /// Do not ask for confirmation (for scripts).
        #[arg(long)]
        yes: bool,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The gauge tick (node counters, oldest-due age, top tenants) across
    /// queue sizes and tenant counts under concurrent merging writes.
    Gauges {
        /// A grid small enough for CI.
        #[arg(long)]
        quick: bool,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
        /// Where to build the bench stores (default: a temporary directory).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// The dispatch tick's read side (active tenants, their head rows, the
    /// fair scheduler's plan; no claim, no delivery) across queue sizes and
    /// tenant counts. Same grid and pass rule as `bench gauges`.
    DispatchTick {
        /// A grid small enough for CI.
        #[arg(long)]
        quick: bool,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Sustained delivery against ingest with the default configuration:
    /// 1,000 tenants, four loopback sinks (one slow), hooks posted at a
    /// fixed rate for 60 s (10 s with --quick); each healthy sink must keep
    /// up (docs/benchmarks.md).
    Delivery {
        /// 100 hooks/s for 10 s instead of 1,000 hooks/s for 60 s.
        #[arg(long)]
        quick: bool,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
    },
    /// Rows per second of the format 2 -> 3 migration, and linearity in rows.
    Migrate {
        #[arg(long)]
        quick: bool,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
        /// Where to build the bench stores (default: a temporary directory).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// The deterministic fairness simulator: our scheduler against the usual
    /// alternatives on every built-in scenario (docs/fairness.md).
    Fairness {
        /// Skip the largest scenarios.
        #[arg(long)]
        quick: bool,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
        /// A scenario file or a directory of them instead of the built-in set.
        #[arg(long, value_name = "PATH")]
        scenarios: Option<PathBuf>,
    },
    /// Acknowledged hooks per second over loopback HTTP with many concurrent
    /// clients, against the raw ceiling of the same synced batches written
    /// straight to the store and the HTTP floor, plus the batch endpoint and
    /// the p99 at half the rate. Exit 1 when a ratio is below its rule.
    Ingest {
        /// Fewer hooks, for CI.
        #[arg(long)]
        quick: bool,
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
        /// Instead: what routing by event type costs. A source with 20
        /// sinks of 5 patterns each, typed from the JSON body, against the
        /// same 20 sinks without patterns, in one run. Exit 1 below 0.9x.
        #[arg(long)]
        routing: bool,
    },
    /// The console's time to first frame and each screen's refresh store
    /// work on a large fixture (10^6 rows, 10^5 tenants) against a small one
    /// (10^3 rows, 10 tenants). Exit 1 when first frame >= 0.5 s or a
    /// refresh costs more than 2x on the large store.
    Console {
        /// Print JSON instead of text (stable fields, documented in docs/).
        #[arg(long)]
        json: bool,
        /// Where to build (and reuse) the bench stores (default: a temporary directory).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Store(c) => store_cmd::run(c),
        Command::Tenants(c) => tenants_cmd::run(c),
        Command::Dlq(c) => dlq_cmd::run(c),
        Command::Sinks(c) => pause_cmd::sinks(c),
        Command::Node(c) => node_cmd::run(c),
        Command::Config(c) => config_cmd::run(c),
        Command::Bench(BenchCommand::Gauges { quick, json, dir }) => {
            crate::bench::gauges::run(quick, json, dir)
        }
        Command::Bench(BenchCommand::Delivery { quick, json }) => {
            crate::bench::delivery::run(quick, json)
        }
        Command::Bench(BenchCommand::DispatchTick { quick, json }) => {
            crate::bench::dispatch_tick::run(quick, json)
        }
        Command::Bench(BenchCommand::Migrate { quick, json, dir }) => {
            crate::bench::migrate::run(quick, json, dir)
        }
        Command::Bench(BenchCommand::Fairness {
            quick,
            json,
            scenarios,
        }) => crate::bench::fairness(quick, json, scenarios),
        Command::Bench(BenchCommand::Ingest {
            quick,
            json,
            routing: true,
        }) => crate::bench::routing::run(quick, json),
        Command::Bench(BenchCommand::Ingest {
            quick,
            json,
            routing: false,
        }) => crate::bench::ingest::run(quick, json),
        Command::Serve { config } => Ok(ankusa_daemon::run(config)?),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "ankusa", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { out } => man(out),
        Command::Demo {
            store,
            no_console,
            duration,
            seed,
            json,
            keep,
        } => crate::demo::run(crate::demo::DemoOptions {
            store,
            no_console,
            duration: duration.into(),
            seed,
            json,
            keep,
        }),
        Command::Bench(BenchCommand::Console { json, dir }) => {
            let report = ankusa_ui::refresh_bench::run(dir)?;
            if json {
                crate::output::print_json(&report)?;
            } else {
                print!("{}", ankusa_ui::refresh_bench::render(&report));
            }
            Ok(if report.pass {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Console {
            store,
            fleet,
            read_only,
            write,
            refresh,
            no_mouse,
            admin,
        } => {
            use tracing_subscriber::layer::SubscriberExt;
            let log =
                tracing::Dispatch::new(tracing_subscriber::registry().with(ankusa_ui::log_layer()));
            if let Some(path) = fleet {
                let fleet = ankusa_ops::fleet::Fleet::load(&path)?;
                ankusa_ui::run_fleet(fleet, refresh.into(), !no_mouse, log)?;
                return Ok(ExitCode::SUCCESS);
            }
            let Some(store) = store else {
                return Err(crate::failure::usage(
                    "give --store DIR or --fleet FLEET.toml",
                ));
            };
            let opts = ankusa_ui::ConsoleOptions {
                store,
                read_only,
                write,
                refresh: refresh.into(),
                token: admin.token,
                mouse: !no_mouse,
            };
            ankusa_ui::run(opts, log)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `ankusa man`: the top page on stdout, or every command's page into a
/// directory (created if missing), named as `man` looks them up.
fn man(out: Option<PathBuf>) -> Result<ExitCode> {
    use color_eyre::eyre::WrapErr;
    // `help` is clap's, not a command of ours: no page names it.
    let cmd = <Cli as clap::CommandFactory>::command().disable_help_subcommand(true);
    match out {
        None => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut buf)
                .wrap_err("cannot render the man page")?;
            std::io::Write::write_all(&mut std::io::stdout(), &buf)
                .wrap_err("cannot write the man page")?;
        }
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .wrap_err_with(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, &dir)
                .wrap_err_with(|| format!("cannot write the man pages into {}", dir.display()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
