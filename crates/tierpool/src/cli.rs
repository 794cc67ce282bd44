//! Command-line definitions. User-facing names here are part of the product.

use clap::builder::TypedValueParser as _;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use tierpool_types::{ByteSize, Span};

#[derive(Parser, Debug)]
#[command(name = "tierpool", version, about = "Pool the memory and disks of many machines into one fast data space.")]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Args, Debug, Clone)]
pub struct Conn {
    /// Coordinator address (host:port).
    #[arg(long, global = true, env = "TIERPOOL_COORDINATOR", default_value = "127.0.0.1:7700")]
    pub coordinator: String,
    /// File holding the pool's secret (default: the one `tierpool up` recorded
    /// for the coordinator's address in ~/.tierpool/pools/, else $TIERPOOL_SECRET_FILE).
    #[arg(long, global = true, value_name = "PATH")]
    pub secret_file: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Start an embedded pool (coordinator + workers) in the background.
    Up(UpArgs),
    /// Stop the embedded pool started by `up`. Workers first write what they
    /// hold in memory to disk, so `up` on the same --dir serves all of it.
    Down {
        /// State directory of the pool.
        #[arg(long, default_value_os_t = default_dir())]
        dir: PathBuf,
    },
    /// Show workers, tiers and capacity.
    Status {
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Run a coordinator in the foreground.
    Coordinator(CoordinatorArgs),
    /// Run a worker in the foreground (`tierpool worker --dir D --mem M --disk D`),
    /// or change the pool's membership (`tierpool worker drain 2`, `tierpool worker remove 2`).
    Worker(WorkerCmd),
    /// Copy a local file (or - for stdin) into the pool.
    Put {
        local: String,
        remote: String,
        /// Chunk size, e.g. 4MiB.
        #[arg(long, default_value = "4MiB")]
        chunk_size: ByteSize,
        /// Eviction priority 1 (first evicted) .. 5 (last).
        #[arg(long, default_value_t = 3)]
        priority: u8,
        /// Keep the file's chunks in memory as long as possible.
        #[arg(long)]
        pin: bool,
        /// Fail instead of replacing an existing file.
        #[arg(long)]
        no_clobber: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Copy a file out of the pool to a local path (or - for stdout).
    Get {
        remote: String,
        local: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Write files to stdout.
    Cat {
        #[arg(required = true)]
        paths: Vec<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// List a directory.
    Ls {
        #[arg(default_value = "/")]
        path: String,
        /// Long format: kind, mode, size, priority, modification time.
        #[arg(short = 'l')]
        long: bool,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show a file's or directory's metadata.
    Stat {
        path: String,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Remove files or directories.
    Rm {
        #[arg(required = true)]
        paths: Vec<String>,
        /// Remove directories and their contents.
        #[arg(short = 'r', long)]
        recursive: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Rename atomically (into DST if DST is a directory).
    Mv {
        src: String,
        dst: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Create directories.
    Mkdir {
        #[arg(required = true)]
        paths: Vec<String>,
        /// Create parents as needed; no error if it exists.
        #[arg(short = 'p', long)]
        parents: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Keep a file's (or a directory's files') chunks in memory as long as possible.
    Pin {
        path: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Undo `pin`.
    Unpin {
        path: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Set how many copies of each chunk a file or region keeps (a
    /// directory: what new entries in it keep; with -r, everything beneath
    /// it too). Raising it copies the existing chunks to more workers
    /// (progress on a terminal); lowering it drops the extra copies.
    Replicas {
        /// A file, region or directory in the pool.
        path: String,
        /// Copies of each chunk, on distinct workers: 1 to the pool's
        /// --replicas (set when it was created).
        #[arg(value_parser = replicas(), value_name = "COPIES")]
        copies: u8,
        /// Also every file, region and directory beneath a directory.
        #[arg(short = 'r', long)]
        recursive: bool,
        /// Print what changed as JSON: files, chunks, bytes.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Set where the chunks of a file are written (a directory: what new
    /// entries in it take; with -r, everything beneath it too). Chunks
    /// already written stay where they are; `stat` shows a path's policy.
    #[command(after_help = PLACEMENT_POLICIES)]
    Placement {
        /// A file or directory in the pool.
        path: String,
        /// hash, local, round-robin or local-only (see below).
        #[arg(value_parser = placement(), value_name = "POLICY")]
        policy: tierpool_types::Placement,
        /// Also every file and directory beneath a directory.
        #[arg(short = 'r', long)]
        recursive: bool,
        /// Print the result as JSON: path, placement, inodes.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// List the files and regions at or under PATH whose chunks are short
    /// of copies (a worker is down, or its replicas are still being copied
    /// again), or have none left.
    #[command(after_help = FSCK_EXIT_STATUS)]
    Fsck {
        /// Where to look: this path and everything beneath it.
        #[arg(default_value = "/")]
        path: String,
        /// Print the list as JSON: path, replicas, chunks, under, lost of each file.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Attach an under-store at pool directory PATH (made if missing; must
    /// be empty): its tree appears there, names, sizes and times, without
    /// copying data; a file's bytes are loaded into the pool on first read.
    #[command(after_help = UNDER_STORES)]
    Attach {
        /// file:///abs/dir, s3://bucket[/prefix] or hdfs://namenode[:port]/dir.
        uri: String,
        /// The pool directory it appears at.
        path: String,
        /// through (writes reach the under-store before they return), back
        /// (acknowledged once on the workers' disks, written below in the
        /// background; sync and fsync wait for it) or pool-only (nothing is
        /// written below).
        #[arg(long, default_value = "through", value_parser = write_mode(), value_name = "MODE")]
        mode: tierpool_meta::WriteMode,
        /// Refuse every change beneath PATH.
        #[arg(long)]
        readonly: bool,
        /// S3 endpoint URL (else $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL).
        #[arg(long)]
        endpoint: Option<String>,
        /// S3 region (else $AWS_REGION, the profile's, us-east-1).
        #[arg(long)]
        region: Option<String>,
        /// Profile of ~/.aws/credentials and ~/.aws/config (else $AWS_PROFILE, default).
        #[arg(long)]
        profile: Option<String>,
        /// Another store option, KEY=VALUE (access_key_id, secret_access_key, session_token).
        #[arg(long = "option", short = 'o', value_name = "KEY=VALUE")]
        options: Vec<String>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Detach the under-store at PATH: the pool forgets the tree and its
    /// copies (the store keeps everything written to it).
    Detach {
        path: String,
        /// Also drop files changed in the pool and not written below.
        #[arg(long)]
        force: bool,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Snapshots of a file or directory tree, and checkpoints of a memory
    /// region: read-only copies that share every unchanged chunk with the
    /// live data (or with the region's previous checkpoint), read at
    /// PATH/.snapshots/NAME/... like any other path.
    #[command(subcommand, after_help = SNAPSHOTS)]
    Snapshot(SnapshotCmd),
    /// List the attached under-stores (secrets hidden).
    Attachments {
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Load the files at PATH (a directory: with -r, everything beneath)
    /// from their under-store into the pool ahead of reads.
    Load {
        path: String,
        #[arg(short = 'r', long)]
        recursive: bool,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Drop the pool's copies of the files at PATH that the under-store
    /// holds as they are (with -r, beneath a directory); reads load them again.
    Free {
        path: String,
        #[arg(short = 'r', long)]
        recursive: bool,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Write the files at or beneath PATH with changes not yet in their
    /// under-store to it (of a back or pool-only attachment too), and wait
    /// for it.
    Sync {
        path: String,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show or set the write mode of the file at PATH, beneath an
    /// attachment (with -r, of every file beneath the directory at PATH):
    /// its own mode, whatever its attachment's, kept when the file is
    /// written again. A file with changes not yet below meets its new mode
    /// at once (through: written below now). Renames, removals and new
    /// directories follow the attachment's mode.
    WriteMode {
        path: String,
        /// through, back, pool-only, or attachment (its attachment's mode
        /// again); without it, show the file's mode.
        #[arg(value_parser = own_write_mode(), value_name = "MODE")]
        mode: Option<OwnMode>,
        #[arg(short = 'r', long)]
        recursive: bool,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Bring the pool's view of the attached tree at or beneath PATH up to
    /// date with the under-store: new objects appear, changed ones replace
    /// unchanged files, vanished ones go.
    SyncMeta {
        path: String,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Write, read back and verify N files; report throughput and latency.
    Bench(BenchArgs),
    /// Mount the pool as a POSIX file system (FUSE); returns once mounted.
    /// As on a local disk, a change is answered once the coordinator's log
    /// holds it (it survives the coordinator's `kill -9`) and is fsynced
    /// there by `fsync` of the file or its directory.
    Mount {
        mountpoint: PathBuf,
        /// Bytes of file chunks kept in memory for reads.
        #[arg(long, default_value = "256MiB")]
        cache: ByteSize,
        /// Bytes of written, unsent data one open file may hold in memory
        /// before it sends some to the workers (full chunks go at once).
        #[arg(long, default_value = "128MiB")]
        dirty: ByteSize,
        /// Serve in the foreground until unmounted.
        #[arg(long)]
        foreground: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Unmount a mount made by `mount`.
    Umount { mountpoint: PathBuf },
    /// Memory regions: pooled memory with a name, used page by page.
    #[command(subcommand)]
    Region(RegionCmd),
    /// Move partitions so each worker holds the share its weight asks for
    /// (capacity, times its measured bandwidth for a slow worker).
    Rebalance {
        /// Show what would move, change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Wait until the partitions are where they should be, showing progress.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct WorkerCmd {
    #[command(subcommand)]
    pub action: Option<WorkerAction>,
    #[command(flatten)]
    pub run: WorkerArgs,
}

#[derive(Subcommand, Debug)]
pub enum SnapshotCmd {
    /// Take snapshot NAME of the file or tree at PATH, atomically; no data
    /// moves (beneath an attached under-store, chunks still below are
    /// loaded into the pool first, with progress). Of a region: a
    /// checkpoint, copying on the workers only the chunks changed since its
    /// previous checkpoint.
    Create {
        path: String,
        name: String,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// List the snapshots of PATH (of every path when none is given).
    Ls {
        path: Option<String>,
        /// Print them as JSON: path, name, created, entries, bytes, kept_bytes.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Remove snapshot NAME of PATH: the chunks only it kept are freed.
    Rm {
        path: String,
        name: String,
        #[command(flatten)]
        conn: Conn,
    },
    /// Put snapshot NAME back at PATH, replacing what is there, in one
    /// step (beneath an attached under-store, what it drops is removed
    /// below first, and the restored files are then written below as their
    /// write modes say, with progress). Of a region: the chunks that differ
    /// are copied back on the workers; refused while another client has
    /// the region open.
    Restore {
        path: String,
        name: String,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Subcommand, Debug)]
pub enum WorkerAction {
    /// Empty a worker: its partitions move to the others while it serves
    /// them; it takes none. Then it can be stopped and removed.
    Drain {
        /// Worker id, as `status` shows it (e.g. 2 or w2).
        #[arg(value_parser = worker_id)]
        worker: u32,
        /// Wait until it holds no partition, showing progress.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Remove a worker from the pool: one that is dead or drained. Its
    /// partitions go to the others at once; what only it held is lost (listed).
    Remove {
        /// Worker id, as `status` shows it (e.g. 2 or w2).
        #[arg(value_parser = worker_id)]
        worker: u32,
        #[command(flatten)]
        conn: Conn,
    },
}

/// A worker id: `2` or `w2`.
fn worker_id(s: &str) -> Result<u32, String> {
    s.strip_prefix('w').unwrap_or(s).parse().map_err(|_| format!("{s:?} is not a worker id (e.g. 2 or w2)"))
}

#[derive(Subcommand, Debug)]
pub enum RegionCmd {
    /// Allocate a zero-filled region; its space is reserved now, or the command fails with "pool full".
    Create {
        path: String,
        /// Size, e.g. 2GiB.
        size: ByteSize,
        /// Chunk size, e.g. 4MiB.
        #[arg(long, default_value = "4MiB")]
        chunk_size: ByteSize,
        /// Eviction priority 1 (first evicted) .. 5 (last).
        #[arg(long, default_value_t = 3)]
        priority: u8,
        /// Keep the region's chunks in memory as long as possible.
        #[arg(long)]
        pin: bool,
        #[command(flatten)]
        conn: Conn,
    },
}

#[derive(Args, Debug)]
pub struct UpArgs {
    /// Number of workers.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=MAX_LOCAL_WORKERS))]
    pub workers: u32,
    /// MEM budget per worker (default: a quarter of this machine's RAM, shared by the workers, at most 4GiB each).
    #[arg(long)]
    pub mem: Option<ByteSize>,
    /// DISK budget per worker (default: a quarter of the free space under --dir, shared, at most 16GiB each).
    #[arg(long)]
    pub disk: Option<ByteSize>,
    /// State directory.
    #[arg(long, default_value_os_t = default_dir())]
    pub dir: PathBuf,
    /// Coordinator port on 127.0.0.1 (0: any free port, chosen by the coordinator).
    #[arg(long, default_value_t = 7700)]
    pub port: u16,
    /// Partition count of a new pool (fixed once the pool exists).
    #[arg(long, default_value_t = tierpool_types::DEFAULT_PARTITIONS, value_parser = partitions())]
    pub partitions: u32,
    /// Copies of each chunk a new pool keeps, on distinct workers (fixed once
    /// the pool exists; a path may keep fewer: `tierpool replicas`).
    /// Default: 2, or 1 with a single worker.
    #[arg(long, value_parser = replicas())]
    pub replicas: Option<u8>,
    /// What a new pool keeps the replicas of a chunk apart by, beyond
    /// distinct workers: distinct --host labels, or distinct --rack labels
    /// (then hosts) where the pool allows. Fixed once the pool exists.
    #[arg(long, value_parser = spread(), value_name = "host|rack")]
    pub spread: Option<tierpool_types::Spread>,
    /// Print the result as JSON: coordinator address, state directory, process ids.
    #[arg(long)]
    pub json: bool,
    /// Stop the pool's processes by themselves when process PID exits (e.g. the
    /// program that started the pool, killed or not).
    #[arg(long, value_name = "PID")]
    pub stop_with: Option<u32>,
    /// Seconds to wait for the coordinator, then for the workers, to be ready.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
    /// File holding the pool's secret (default: DIR/coordinator/secret, made on
    /// first start). `up` records it in ~/.tierpool/pools/ for local clients.
    #[arg(long, value_name = "PATH")]
    pub secret_file: Option<PathBuf>,
    /// How often files of `back` attachments not yet in their under-store
    /// are written there (the coordinator's --write-back-every).
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub write_back_every: Span,
    /// Files of at most SIZE written whole are kept by the metadata, bytes
    /// and all (the coordinator's --inline-max; 0: none, at most 64KiB).
    #[arg(long, default_value = "4KiB", value_name = "SIZE")]
    pub inline_max: ByteSize,
    /// When the metadata log is fsynced (the coordinator's --log-sync):
    /// `always`, before each change is acknowledged, or within a period
    /// such as `10ms` (acknowledged once written: safe from the
    /// coordinator's process dying, not from a crash of the machine).
    #[arg(long, default_value = "always", value_name = "always|DURATION", value_parser = log_sync)]
    pub log_sync: tierpool_coordinator::LogSync,
    /// Have each worker fill its chunk buffers ahead, its whole MEM budget
    /// (at least 16 buffers; the workers' --prefault).
    #[arg(long)]
    pub prefault: bool,
}

/// Most workers `up` starts on one machine.
pub const MAX_LOCAL_WORKERS: i64 = 256;

/// Most partitions a pool may have: the table (and every client's copy of it)
/// and the cost of moving partitions grow with the count, and a million is
/// far more than any pool needs.
pub const MAX_PARTITIONS: i64 = 1 << 20;

fn partitions() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(1..=MAX_PARTITIONS)
}

/// What `fsck`'s exit status says (2 stays the status of a usage error,
/// as for every command).
pub const FSCK_EXIT_STATUS: &str = "\
Exit status:
  0  every chunk has all its copies
  1  some chunk has no copy left (lost: unreadable until its worker comes back), or fsck could not run
  3  some chunks are short of copies, none lost (readable; the pool copies them again while it can)";

/// What `placement` policies do.
pub const PLACEMENT_POLICIES: &str = "\
Policies:
  hash         each chunk on the workers its partition hashes to: a file spreads over the pool (default)
  local        the first copy of each chunk on the writer's own worker (same --host label as the
               writer's TIERPOOL_HOST, by default its hostname), else one in its rack (TIERPOOL_RACK),
               else hashed; the other copies elsewhere as usual
  round-robin  the chunks of a file dealt over the workers in turn: each holds an equal share
  local-only   one copy, on the writer's own worker; writing fails where the writer has none.
               For intermediate data only that machine reads: lost if that worker is lost
A chunk stays findable whatever its policy; it moves with its partition when the pool changes shape.";

fn write_mode() -> impl clap::builder::TypedValueParser<Value = tierpool_meta::WriteMode> {
    clap::builder::PossibleValuesParser::new(tierpool_meta::WriteMode::ALL.map(|m| m.name()))
        .map(|s| tierpool_meta::WriteMode::parse(&s).expect("a listed mode"))
}

/// A write mode to set on files: one of their own, or their attachment's (`None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnMode(pub Option<tierpool_meta::WriteMode>);

fn own_write_mode() -> impl clap::builder::TypedValueParser<Value = OwnMode> {
    let names: Vec<&str> = tierpool_meta::WriteMode::ALL.iter().map(|m| m.name()).chain(["attachment"]).collect();
    clap::builder::PossibleValuesParser::new(names).map(|s| OwnMode(tierpool_meta::WriteMode::parse(&s)))
}

const SNAPSHOTS: &str = "\
Snapshots:
  tierpool snapshot create /data monday      take one (metadata only: no data moves)
  tierpool ls /data/.snapshots/monday         read it like any path (read-only)
  tierpool snapshot restore /data monday      put /data back as it was, atomically
  tierpool snapshot rm /data monday           free what only it kept

A snapshot is named by the path it was taken of, as it was then. Files keep
their chunk versions while a snapshot names them; status shows the bytes
snapshots keep that no live file uses. Trees holding a memory region are
not snapshotted. Beneath an attached under-store, a snapshot keeps what the
pool holds: chunks still below are loaded first; a restore there removes
below what it drops and writes the restored files below as their write modes
say (through: at once; back: by the write-back).

Checkpoints of a memory region (the same commands, given the region's path):
  tierpool snapshot create /m/grid step10     copies only the chunks changed since
                                              the region's previous checkpoint
  tierpool snapshot restore /m/grid step10    copies back the chunks that differ
A region's chunks change in place, so a checkpoint copies them on the workers
that hold them (nothing crosses the network). A restore is refused while
another client has the region open; one that stopped half way leaves the
region unopenable (stat shows \"restoring\") until it is run again.";

const UNDER_STORES: &str = "\
Under-stores:
  file:///data/in            a directory (local, NFS)
  s3://bucket[/prefix]       an S3-compatible object store: --endpoint, --region,
                             credentials from -o access_key_id=.. -o secret_access_key=..,
                             $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY or ~/.aws/credentials
  hdfs://namenode[:8020]/dir a directory of HDFS, through the NameNode's RPC port
                             (settings from $HADOOP_CONF_DIR as the Hadoop tools read them)
A file read before it changed below is loaded as it was; one changed below since
is refused (stale) until `tierpool sync-meta PATH` picks the change up.

Examples:
  tierpool attach file:///data/in /in --readonly
  tierpool attach s3://lake/2026 /lake --endpoint http://127.0.0.1:9000 --mode through
  tierpool attach hdfs://namenode:8020/warehouse /wh --mode back
  tierpool load -r /lake/day1 && tierpool free -r /lake/day1";

fn placement() -> impl clap::builder::TypedValueParser<Value = tierpool_types::Placement> {
    clap::builder::PossibleValuesParser::new(tierpool_types::Placement::ALL.map(|p| p.name()))
        .map(|s| s.parse::<tierpool_types::Placement>().expect("a listed policy"))
}

fn spread() -> impl clap::builder::TypedValueParser<Value = tierpool_types::Spread> {
    clap::builder::PossibleValuesParser::new(["host", "rack"])
        .map(|s| s.parse::<tierpool_types::Spread>().expect("a listed spread"))
}

/// Replicas 1 to 8 (the state machine's `MAX_REPLICAS`).
fn replicas() -> clap::builder::RangedI64ValueParser<u8> {
    clap::value_parser!(u8).range(1..=8)
}

#[derive(Args, Debug)]
pub struct CoordinatorArgs {
    /// State directory (metadata log and snapshots).
    #[arg(long)]
    pub dir: PathBuf,
    /// Address to listen on (port 0 picks a free port; the bound address is
    /// written to DIR/coordinator.addr).
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub listen: String,
    /// Partition count of a new pool (fixed once the pool exists).
    #[arg(long, default_value_t = tierpool_types::DEFAULT_PARTITIONS, value_parser = partitions())]
    pub partitions: u32,
    /// Copies of each chunk a new pool keeps, on distinct workers (default
    /// 2; fixed once the pool exists: another value is refused).
    #[arg(long, value_parser = replicas())]
    pub replicas: Option<u8>,
    /// What a new pool keeps the replicas of a chunk apart by, beyond
    /// distinct workers: distinct --host labels (default), or distinct
    /// --rack labels where the pool allows. Fixed once the pool exists.
    #[arg(long, value_parser = spread(), value_name = "host|rack")]
    pub spread: Option<tierpool_types::Spread>,
    /// A worker silent for this long is declared down: in a pool keeping
    /// more than one copy, the replicas it held are copied again from the others.
    #[arg(long, default_value = "3s", value_name = "DURATION")]
    pub dead_after: Span,
    /// Stop when process PID exits.
    #[arg(long, value_name = "PID")]
    pub stop_with: Option<u32>,
    /// How often every worker's chunks are checked for orphans (chunks that
    /// no file, open file or live writer will ever use), which are deleted.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub sweep_every: Span,
    /// How long a client's hold on its open files and files being written
    /// outlives its last renewal (clients renew every 2s); a writer silent
    /// longer is given up on.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub hold_period: Span,
    /// Most partitions moving between workers at once (after a join, a
    /// drain, a rebalance).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub max_moving: u32,
    /// Most bytes a second the moves of partitions copy, all together
    /// (e.g. 100MiB; 0: as fast as they can).
    #[arg(long, default_value = "0", value_name = "SIZE")]
    pub move_rate: ByteSize,
    /// A worker whose links carry data more than PERCENT slower than the
    /// fastest worker's, for a whole --bandwidth-window, gets a share of
    /// partitions weighed by its bandwidth as well as its capacity (and
    /// gets it back when it recovers). 0: shares by capacity only.
    #[arg(long, default_value_t = 20, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(0..=99))]
    pub bandwidth_threshold: u8,
    /// The window workers' bandwidth is measured over, and how long a
    /// change must last before shares follow it.
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub bandwidth_window: Span,
    /// Files of at most SIZE, written whole (put, Python, fsspec), are kept
    /// by the metadata itself, bytes and all: one round trip to write or
    /// read them, nothing on the workers (0: none; at most 64KiB).
    #[arg(long, default_value = "4KiB", value_name = "SIZE")]
    pub inline_max: ByteSize,
    /// Most bytes of such small files the metadata keeps in all (they live
    /// in the coordinator's memory and in every snapshot, written while
    /// changes wait); past it, small files go to the workers like any other.
    #[arg(long, default_value = "256MiB", value_name = "SIZE")]
    pub inline_total: ByteSize,
    /// File holding the pool's secret, which every peer must prove it knows
    /// (default: DIR/secret, 32 random bytes made on first start, mode 0600).
    #[arg(long, value_name = "PATH")]
    pub secret_file: Option<PathBuf>,
    /// How often files of attachments in `back` mode that are not yet in
    /// their under-store are written there.
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub write_back_every: Span,
    /// Most files one transaction may write; a transaction writing more
    /// fails (InvalidArgument) and publishes nothing.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub tx_max_files: u32,
    /// Most pages (4 KiB) of memory regions one transaction may write (at
    /// most 16384); their bytes travel in the commit's metadata log record. A
    /// transaction writing more fails (InvalidArgument) and publishes
    /// nothing.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=16384))]
    pub tx_max_pages: u32,
    /// Lets transactions commit without the write-write check, losing
    /// updates under contention: only to show that a history checker
    /// notices (never in a real pool).
    #[arg(long, hide = true)]
    pub unsafe_no_write_check: bool,
    /// When the metadata log is fsynced. `always`: before any change is
    /// acknowledged (a change acknowledged survives a crash of the
    /// machine). A duration such as `10ms` or `1s`: a change is acknowledged
    /// once written to the log (it survives the coordinator's process
    /// dying, `kill -9` included) and fsynced within that period; a crash
    /// of the machine loses at most that period's changes, never the
    /// consistency of the rest (deletes wait for the fsync).
    #[arg(long, default_value = "always", value_name = "always|DURATION", value_parser = log_sync)]
    pub log_sync: tierpool_coordinator::LogSync,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Longest `--log-sync` period: what a crash of the machine may lose.
pub const MAX_LOG_SYNC: std::time::Duration = std::time::Duration::from_secs(10);

/// `--log-sync`: `always`, or a period of at least 1ms and at most 10s.
pub fn log_sync(s: &str) -> Result<tierpool_coordinator::LogSync, String> {
    use tierpool_coordinator::LogSync;
    if s == "always" {
        return Ok(LogSync::Always);
    }
    let Ok(Span(p)) = s.parse::<Span>() else {
        return Err(format!("'{s}' is neither 'always' nor a duration such as 10ms or 1s"));
    };
    if p < std::time::Duration::from_millis(1) || p > MAX_LOG_SYNC {
        return Err(format!("the period must be at least 1ms and at most {}s", MAX_LOG_SYNC.as_secs()));
    }
    Ok(LogSync::Every(p))
}

/// What peers may make a server hold; the defaults suit each role.
#[derive(Args, Debug, Clone)]
pub struct LimitArgs {
    /// Bytes that requests being read or handled may hold, all connections
    /// together (default: 256MiB for a coordinator, 128MiB for a worker).
    #[arg(long, value_name = "SIZE")]
    pub frame_budget: Option<ByteSize>,
    /// Connections open at once (default: 1024 for a coordinator, 512 for a worker).
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
}

impl LimitArgs {
    /// `base` with the limits given on the command line.
    pub fn apply(&self, mut base: tierpool_net::Limits) -> tierpool_net::Limits {
        if let Some(b) = self.frame_budget {
            base.budget = b;
        }
        if let Some(n) = self.max_connections {
            base.max_connections = n;
        }
        base
    }
}

#[derive(Args, Debug)]
pub struct WorkerArgs {
    // Required to run a worker, not with a subcommand (clap drops the
    // requirement then, hence the options).
    /// State directory (DISK tier chunks, identity).
    #[arg(long, required = true)]
    pub dir: Option<PathBuf>,
    /// MEM budget, e.g. 1GiB.
    #[arg(long, required = true)]
    pub mem: Option<ByteSize>,
    /// DISK budget, e.g. 10GiB.
    #[arg(long, required = true)]
    pub disk: Option<ByteSize>,
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Host label used for placement (default: this machine's hostname).
    #[arg(long)]
    pub host: Option<String>,
    /// Rack label used for placement.
    #[arg(long, default_value = "default")]
    pub rack: String,
    /// Stop when process PID exits.
    #[arg(long, value_name = "PID")]
    pub stop_with: Option<u32>,
    /// Fill the buffers chunks are written into ahead, the whole MEM budget
    /// (at least 16 buffers), from the start (a thread of its own): the
    /// first writes find their memory ready, and the worker holds its MEM
    /// budget whether used or not, while MEM has room for it. Without it,
    /// 16 freed chunk buffers are kept for reuse.
    #[arg(long)]
    pub prefault: bool,
    #[command(flatten)]
    pub conn: Conn,
    #[command(flatten)]
    pub limits: LimitArgs,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Number of files.
    #[arg(long, default_value_t = 16)]
    pub files: u32,
    /// Size of each file.
    #[arg(long, default_value = "64MiB")]
    pub size: ByteSize,
    /// Concurrent operations.
    #[arg(long, default_value_t = 4)]
    pub threads: u32,
    /// Chunk size.
    #[arg(long, default_value = "4MiB")]
    pub chunk_size: ByteSize,
    /// Instead of files: open N fresh connections to the coordinator, one
    /// after another, each carrying one ping; report what each cost.
    #[arg(long, value_name = "N")]
    pub connections: Option<u32>,
    /// Write and read the files N to a request, with `put_many` and
    /// `get_many` (the client's batch API); `--threads` batches at once.
    /// Stats and deletes stay one file per request.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub batch: u32,
    /// Read all the files back N times over in the read phase, each pass
    /// verified, so that a read phase of small files lasts long enough to
    /// measure; ops/s counts every read.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub reads: u32,
    /// Threads the benchmark's own client runs on. By default one for
    /// files under 1 MiB, as redis-benchmark runs one event loop: small
    /// operations cost the client little each, and on a machine it shares
    /// with the pool a second thread spends a core on waking the first
    /// (4 KiB reads here: about 190k/s on two threads, 240k on one).
    /// Larger files are checksummed and copied at gigabytes a second: one
    /// thread per core (at most 8).
    #[arg(long, value_name = "N")]
    pub client_threads: Option<u32>,
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub conn: Conn,
}

pub fn default_dir() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/tmp")).join(".tierpool")
}
