//! Inputs by path or URL: a local file, or an `s3://bucket/key`, `http://` or `https://` object read
//! by byte ranges (the Arrow project's `object_store`), behind one `Read + Seek` type, [`Source`].
//!
//! Job code opens inputs through [`Source::open`] and does not branch on local or remote beyond that.
//! A remote reader fetches windows of the object: after a seek a small window (64 KiB, a few BGZF
//! blocks: a region query fetches little more than the blocks it needs), growing while reading goes
//! on sequentially (up to 8 MiB), with up to [`READ_AHEAD`] windows fetched ahead in the background
//! once reading is clearly sequential (whole-file jobs stream). A reader told where its reading
//! stops ([`Source::expect_end`]: a range task) fetches 8 MiB windows from the start and reads
//! ahead at once, none past that end. Memory per reader is bounded by
//! `(READ_AHEAD + 1) × 8 MiB`.
//!
//! S3 credentials and settings come from the usual AWS environment (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`/`AWS_DEFAULT_REGION`,
//! `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL` for MinIO or moto, web identity and container credentials), else from the
//! shared files (`AWS_PROFILE` or `default` in `~/.aws/credentials` and `~/.aws/config`,
//! `AWS_SHARED_CREDENTIALS_FILE`, `AWS_CONFIG_FILE`); with no credentials at all requests are
//! unsigned (public buckets). Errors name the object by its URL without user info and never carry
//! credentials.
//!
//! A program that holds its own S3 settings (the Python package's `storage_options`) sets them
//! for the process with [`set_s3_options`]; they take the place of the environment's.
//!
//! Bytes and requests fetched are counted process-wide ([`fetched`]), so a caller can report them.

use bytes::Bytes;
use object_store::{ObjectStore, ObjectStoreExt};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// The first window fetched after a seek.
const MIN_WINDOW: u64 = 64 * 1024;
/// The largest window.
const MAX_WINDOW: u64 = 8 << 20;
/// Windows fetched ahead once reading is sequential and windows have reached [`READ_AHEAD_FROM`].
pub const READ_AHEAD: usize = 3;
/// The window size from which reading ahead starts.
const READ_AHEAD_FROM: u64 = 1 << 20;

static FETCHED_BYTES: AtomicU64 = AtomicU64::new(0);
static REQUESTS: AtomicU64 = AtomicU64::new(0);

/// Bytes fetched from remote objects and requests made (ranged GETs and HEADs) by this process so far.
pub fn fetched() -> (u64, u64) {
    (
        FETCHED_BYTES.load(Ordering::Relaxed),
        REQUESTS.load(Ordering::Relaxed),
    )
}

/// Whether `path` is a URL this crate reads remotely (`s3://`, `http://`, `https://`).
pub fn is_url(path: &str) -> bool {
    let lower = path.get(..8).unwrap_or(path).to_ascii_lowercase();
    lower.starts_with("s3://") || lower.starts_with("http://") || lower.starts_with("https://")
}

/// Whether `path` is read remotely: a URL ([`is_url`]) or a local name set as an alias of one
/// ([`S3Options::aliases`]).
pub fn is_remote(path: &str) -> bool {
    is_url(path) || alias(path).is_some()
}

/// [`is_url`] for a path.
pub fn is_url_path(path: &Path) -> bool {
    path.to_str().is_some_and(is_url)
}

/// Whether the file or object at `path` exists (for a URL: its metadata can be fetched).
pub fn exists(path: &str) -> bool {
    if let Some(a) = alias(path) {
        return Remote::open(&a.url).is_ok();
    }
    if is_url(path) {
        Remote::open(path).is_ok()
    } else {
        Path::new(path).exists()
    }
}

/// An input: a local file or a remote object, readable and seekable.
pub enum Source {
    /// A local file.
    Local(File),
    /// A remote object.
    Remote(RemoteReader),
}

impl Source {
    /// Opens `path`: a URL ([`is_url`]) remotely, a path set as an alias of one
    /// ([`set_s3_options`]) as that URL, anything else as a local file.
    pub fn open(path: &str) -> io::Result<Self> {
        if let Some(a) = alias(path) {
            let mut reader = RemoteReader::new(Remote::open(&a.url)?);
            reader.counter = a.fetched;
            reader.planned = a.planned;
            return Ok(Self::Remote(reader));
        }
        if is_url(path) {
            Ok(Self::Remote(RemoteReader::new(Remote::open(path)?)))
        } else {
            File::open(path).map(Self::Local)
        }
    }

    /// [`Source::open`] for a path (a URL given as a path is still a URL).
    pub fn open_path(path: &Path) -> io::Result<Self> {
        match path.to_str() {
            Some(s) => Self::open(s),
            None => File::open(path).map(Self::Local),
        }
    }

    /// The size in bytes.
    pub fn len(&self) -> io::Result<u64> {
        match self {
            Self::Local(f) => Ok(f.metadata()?.len()),
            Self::Remote(r) => Ok(r.remote.size),
        }
    }

    /// Whether the input is empty.
    pub fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Tells a remote reader that reading is expected to stop near `end` (a byte range task's
    /// limit): windows and read-ahead stop there until the reader goes past it. No effect on a
    /// local file.
    pub fn expect_end(&mut self, end: u64) {
        if let Self::Remote(r) = self {
            r.expected_end = end;
        }
    }

    /// An independent reader of the same input, at its start (a remote object is not fetched again
    /// for its metadata).
    pub fn reopen(&self) -> io::Result<Self> {
        match self {
            Self::Local(f) => f.try_clone().map(|mut f| {
                let _ = f.rewind();
                Self::Local(f)
            }),
            Self::Remote(r) => {
                let mut reader = RemoteReader::new(Arc::clone(&r.remote));
                reader.counter = r.counter.clone();
                reader.planned = r.planned.clone();
                Ok(Self::Remote(reader))
            }
        }
    }
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Local(f) => f.read(buf),
            Self::Remote(r) => r.read(buf),
        }
    }
}

impl Seek for Source {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        match self {
            Self::Local(f) => f.seek(pos),
            Self::Remote(r) => r.seek(pos),
        }
    }
}

/// The size of the file or object at `path`.
pub fn size(path: &str) -> io::Result<u64> {
    if let Some(a) = alias(path) {
        return Ok(Remote::open(&a.url)?.size);
    }
    if is_url(path) {
        Ok(Remote::open(path)?.size)
    } else {
        std::fs::metadata(path).map(|m| m.len())
    }
}

/// Windows up to this size are kept in their object's cache (the windows after a seek: planning
/// probes, range starts, index queries), where the other readers of the object find them.
const CACHED_WINDOW: u64 = 1 << 20;
/// The bytes of windows kept per object, the oldest dropped first.
const CACHE_BYTES: u64 = 16 << 20;
/// An object opened again within this time of its last opening is the same [`Remote`]: no new
/// request for its size, and the windows its other readers cached (one job opens its input many
/// times: planning, each byte range, the index).
const REUSE_WITHIN: Duration = Duration::from_secs(5);
/// Objects remembered for reuse.
const REUSED: usize = 4;

/// The I/O runtime shared by the open remote objects; it ends with the last of them.
fn runtime() -> io::Result<Arc<tokio::runtime::Runtime>> {
    static SHARED: Mutex<Weak<tokio::runtime::Runtime>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(rt) = shared.upgrade() {
        return Ok(rt);
    }
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sortase-io")
            .enable_all()
            .build()?,
    );
    *shared = Arc::downgrade(&rt);
    Ok(rt)
}

/// Makes `ring` the process's TLS crypto provider (the one object_store signs with), unless the
/// embedding program has installed one.
fn install_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Fails only when another thread installed one first: that one is used.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

/// An opened remote object: its store, location and size.
pub struct Remote {
    store: Arc<dyn ObjectStore>,
    location: object_store::path::Path,
    size: u64,
    /// The object's ETag when opened: every ranged read asks for that version (`If-Match`), so
    /// a job never mixes the bytes of two versions of an object.
    e_tag: Option<String>,
    rt: Arc<tokio::runtime::Runtime>,
    /// Windows fetched (start, bytes), oldest first, at most [`CACHE_BYTES`] together.
    cache: Mutex<VecDeque<(u64, Bytes)>>,
}

/// Objects opened lately (URL, last opening), for [`REUSE_WITHIN`].
type Opened = VecDeque<(String, std::time::Instant, Arc<Remote>)>;
static OPENED: Mutex<Opened> = Mutex::new(VecDeque::new());

impl Drop for Remote {
    fn drop(&mut self) {
        // The store's connections are tied to the runtime: drop them inside it.
        let _guard = self.rt.enter();
    }
}

/// S3 settings given by the program rather than the environment ([`set_s3_options`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Options {
    /// The endpoint (`http://127.0.0.1:9000` for MinIO or moto); `None`: AWS, or the environment's.
    pub endpoint: Option<String>,
    /// Access key id and secret: both, or neither (then the environment's credentials).
    pub access_key_id: Option<String>,
    /// The secret access key.
    pub secret_access_key: Option<String>,
    /// A session token for temporary credentials.
    pub session_token: Option<String>,
    /// The region; `None`: the environment's, else `us-east-1`.
    pub region: Option<String>,
    /// Unsigned requests (a public bucket), whatever the environment holds.
    pub anonymous: bool,
    /// Local paths that stand for objects (path, URL): [`Source::open`], [`size`] and [`exists`]
    /// of such a path read the object. A program that hands a job spec with local names to a
    /// planner (the Dask driver: its tasks fetch byte ranges to those names) lets the planner
    /// read the objects by ranges instead of copying them first.
    pub aliases: Vec<(String, String)>,
}

static S3_OPTIONS: Mutex<Option<S3Options>> = Mutex::new(None);

/// Sets the S3 settings (and path aliases) of every object opened from now on in this process
/// (`None`: back to the environment's, no aliases). Objects opened before are forgotten, so that
/// none is reused with other credentials.
pub fn set_s3_options(options: Option<S3Options>) {
    *S3_OPTIONS.lock().unwrap_or_else(|e| e.into_inner()) = options;
    OPENED.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// Sets the S3 settings of objects opened from now on, as [`set_s3_options`] does, but keeps the
/// path aliases set (the driver's, or tasks' ones, [`alias_paths`]), and forgets the objects opened
/// before only when the settings change: what a task calls before it runs, on a worker that may
/// share its process with a driver and runs many tasks with the same settings.
pub fn use_s3_settings(settings: S3Options) {
    let mut options = S3_OPTIONS.lock().unwrap_or_else(|e| e.into_inner());
    let aliases = options
        .as_ref()
        .map(|o| o.aliases.clone())
        .unwrap_or_default();
    let new = S3Options {
        aliases,
        ..settings
    };
    if options.as_ref() != Some(&new) {
        *options = Some(new);
        OPENED.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// A local path that stands for an object while a task runs ([`alias_paths`]).
struct TaskAlias {
    path: String,
    url: String,
    /// The byte ranges the task reads (sorted, disjoint; `None`: all of it).
    planned: Option<Arc<Vec<(u64, u64)>>>,
    /// The bytes fetched by the readers opened through it (its [`Aliases`]' count).
    fetched: Arc<AtomicU64>,
}

/// What a path stands for: the object, and for a task's path its planned ranges and its count.
struct Alias {
    url: String,
    planned: Option<Arc<Vec<(u64, u64)>>>,
    fetched: Option<Arc<AtomicU64>>,
}

static TASK_ALIASES: Mutex<Vec<TaskAlias>> = Mutex::new(Vec::new());

/// Paths that stand for objects until dropped ([`alias_paths`]), and the bytes fetched through them.
#[must_use = "the aliases end when this is dropped"]
pub struct Aliases {
    fetched: Arc<AtomicU64>,
}

impl Aliases {
    /// Bytes the readers opened through these paths fetched so far (their own fetches, not the
    /// windows another reader of the object had cached).
    pub fn fetched(&self) -> u64 {
        self.fetched.load(Ordering::Relaxed)
    }
}

impl Drop for Aliases {
    fn drop(&mut self) {
        let mut all = TASK_ALIASES.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|a| !Arc::ptr_eq(&a.fetched, &self.fetched));
    }
}

/// Makes each local path of `paths` (path, URL, the byte ranges the task reads: sorted and
/// disjoint, `None` for all of it) stand for its object until the returned [`Aliases`] is
/// dropped: [`Source::open`], [`size`] and [`exists`] of the path read the object by ranges,
/// under the process's S3 settings. A distributed task reads its inputs this way, in place of
/// copies: its paths are unique (a scratch directory of its own), so tasks running side by side
/// in one process each have theirs, and the bytes each fetched are counted apart. A reader of
/// such a path fetches each planned range in as few requests as it can (windows reaching to the
/// range's end, up to 8 MiB, read ahead), as a copy of the ranges would.
pub fn alias_paths(
    paths: impl IntoIterator<Item = (String, String, Option<Vec<(u64, u64)>>)>,
) -> Aliases {
    let fetched = Arc::new(AtomicU64::new(0));
    let mut all = TASK_ALIASES.lock().unwrap_or_else(|e| e.into_inner());
    all.extend(paths.into_iter().map(|(path, url, ranges)| TaskAlias {
        path,
        url,
        planned: Some(Arc::new(ranges.unwrap_or_else(|| vec![(0, u64::MAX)]))),
        fetched: Arc::clone(&fetched),
    }));
    Aliases { fetched }
}

/// What `path` stands for ([`alias_paths`], then [`S3Options::aliases`]).
fn alias(path: &str) -> Option<Alias> {
    {
        let tasks = TASK_ALIASES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = tasks.iter().find(|a| a.path == path) {
            return Some(Alias {
                url: a.url.clone(),
                planned: a.planned.clone(),
                fetched: Some(Arc::clone(&a.fetched)),
            });
        }
    }
    let options = S3_OPTIONS.lock().unwrap_or_else(|e| e.into_inner());
    let aliases = &options.as_ref()?.aliases;
    aliases.iter().find(|(p, _)| p == path).map(|(_, u)| Alias {
        url: u.clone(),
        planned: None,
        fetched: None,
    })
}

fn s3_options() -> Option<S3Options> {
    S3_OPTIONS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

fn retry() -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: 3,
        retry_timeout: Duration::from_secs(30),
        ..Default::default()
    }
}

/// The URL without user info (`user:password@`), as errors show it.
pub fn redacted(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            format!("{scheme}://{host}{tail}")
        }
        None => url.to_string(),
    }
}

/// One line for an `object_store` error: the kind of failure, without URLs or credentials.
fn describe(e: &object_store::Error) -> io::Error {
    use object_store::Error as E;
    let (kind, text) = match e {
        E::NotFound { .. } => (io::ErrorKind::NotFound, "no such object".to_string()),
        E::Precondition { .. } => (
            io::ErrorKind::Other,
            "the object changed while it was read".to_string(),
        ),
        E::PermissionDenied { .. } => (
            io::ErrorKind::PermissionDenied,
            "access denied (check the credentials)".to_string(),
        ),
        E::Unauthenticated { .. } => (
            io::ErrorKind::PermissionDenied,
            "not authenticated (check the credentials)".to_string(),
        ),
        other => {
            // The innermost cause says what went wrong (connection refused, an HTTP status);
            // outer layers repeat the request's URL.
            let mut cause: &dyn std::error::Error = other;
            while let Some(next) = cause.source() {
                cause = next;
            }
            let text = cause.to_string();
            let line = text.lines().next().unwrap_or("").trim().to_string();
            let lower = text.to_ascii_lowercase();
            if lower.contains("403")
                || lower.contains("forbidden")
                || lower.contains("accessdenied")
            {
                (
                    io::ErrorKind::PermissionDenied,
                    "access denied (check the credentials)".to_string(),
                )
            } else if lower.contains("404") || lower.contains("nosuchkey") {
                (io::ErrorKind::NotFound, "no such object".to_string())
            } else {
                (io::ErrorKind::Other, format!("cannot fetch: {line}"))
            }
        }
    };
    io::Error::new(kind, scrub(text))
}

/// `text` with the values of credential variables blanked, in case a message ever echoes one.
fn scrub(text: String) -> String {
    let mut text = text;
    for var in [
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_ACCESS_KEY_ID",
    ] {
        if let Ok(v) = std::env::var(var) {
            if v.len() >= 4 {
                text = text.replace(&v, "***");
            }
        }
    }
    if let Some(o) = s3_options() {
        for v in [o.access_key_id, o.secret_access_key, o.session_token]
            .into_iter()
            .flatten()
        {
            if v.len() >= 4 {
                text = text.replace(&v, "***");
            }
        }
    }
    text
}

fn invalid(text: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, text.into())
}

/// The value of `key` in section `section` of the INI file at `path`.
fn ini_value(path: &Path, section: &str, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == section;
        } else if inside {
            if let Some((k, v)) = line.split_once('=') {
                if k.trim() == key {
                    return Some(v.trim().to_string());
                }
            }
        }
    }
    None
}

/// Credentials and region of the shared AWS files, for the profile `AWS_PROFILE` (or `default`).
fn profile_settings(
    builder: object_store::aws::AmazonS3Builder,
) -> (object_store::aws::AmazonS3Builder, bool) {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let file = |var: &str, name: &str| {
        std::env::var_os(var)
            .map(std::path::PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
    };
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
    let config_section = if profile == "default" {
        profile.clone()
    } else {
        format!("profile {profile}")
    };
    let mut builder = builder;
    let mut signed = false;
    if let Some(creds) = file("AWS_SHARED_CREDENTIALS_FILE", "credentials") {
        let key = ini_value(&creds, &profile, "aws_access_key_id");
        let secret = ini_value(&creds, &profile, "aws_secret_access_key");
        if let (Some(key), Some(secret)) = (key, secret) {
            builder = builder
                .with_access_key_id(key)
                .with_secret_access_key(secret);
            if let Some(token) = ini_value(&creds, &profile, "aws_session_token") {
                builder = builder.with_token(token);
            }
            signed = true;
        }
    }
    if let Some(config) = file("AWS_CONFIG_FILE", "config") {
        let no_region = std::env::var_os("AWS_REGION").is_none()
            && std::env::var_os("AWS_DEFAULT_REGION").is_none();
        if no_region {
            if let Some(region) = ini_value(&config, &config_section, "region") {
                builder = builder.with_region(region);
            }
        }
        if endpoint_from_env().is_none() {
            if let Some(url) = ini_value(&config, &config_section, "endpoint_url") {
                if url.starts_with("http://") {
                    builder = builder.with_allow_http(true);
                }
                builder = builder.with_endpoint(url);
            }
        }
    }
    (builder, signed)
}

/// The S3 endpoint set in the environment (`AWS_ENDPOINT_URL_S3` first, as the AWS CLI).
fn endpoint_from_env() -> Option<String> {
    ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
}

fn s3_store(bucket: &str) -> io::Result<(Arc<dyn ObjectStore>, bool)> {
    let env = |v: &str| std::env::var_os(v).is_some_and(|s| !s.is_empty());
    let mut builder = object_store::aws::AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_retry(retry());
    let mut signed = env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY");
    if !signed {
        let (b, from_profile) = profile_settings(builder);
        builder = b;
        signed = from_profile;
    }
    let delegated = (env("AWS_WEB_IDENTITY_TOKEN_FILE") && env("AWS_ROLE_ARN"))
        || env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        || env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    if !signed && !delegated {
        // No credentials anywhere: unsigned requests, as for a public bucket.
        builder = builder.with_skip_signature(true);
    }
    if endpoint_from_env().is_some_and(|e| e.starts_with("http://")) {
        builder = builder.with_allow_http(true);
    }
    if let Some(o) = s3_options() {
        if let Some(endpoint) = o.endpoint {
            builder = builder
                .with_allow_http(endpoint.starts_with("http://"))
                .with_endpoint(endpoint);
        }
        if let Some(region) = o.region {
            builder = builder.with_region(region);
        }
        if let (Some(key), Some(secret)) = (o.access_key_id, o.secret_access_key) {
            builder = builder
                .with_access_key_id(key)
                .with_secret_access_key(secret)
                .with_skip_signature(false);
            if let Some(token) = o.session_token {
                builder = builder.with_token(token);
            }
            signed = true;
        }
        if o.anonymous {
            builder = builder.with_skip_signature(true);
            signed = false;
        }
    }
    let store = builder
        .build()
        .map_err(|e| invalid(format!("S3 configuration: {}", scrub(e.to_string()))))?;
    Ok((Arc::new(store), signed || delegated))
}

impl Remote {
    /// Opens the object at `url` (fetches its size), or returns the object opened at `url` within
    /// [`REUSE_WITHIN`].
    pub fn open(url: &str) -> io::Result<Arc<Self>> {
        let now = std::time::Instant::now();
        {
            let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
            opened.retain(|(_, at, _)| now.duration_since(*at) < REUSE_WITHIN);
            if let Some(entry) = opened.iter_mut().find(|(u, _, _)| u == url) {
                entry.1 = now;
                return Ok(Arc::clone(&entry.2));
            }
        }
        let remote = Self::open_new(url)?;
        let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
        opened.push_back((url.to_string(), now, Arc::clone(&remote)));
        while opened.len() > REUSED {
            opened.pop_front();
        }
        Ok(remote)
    }

    fn open_new(url: &str) -> io::Result<Arc<Self>> {
        let (scheme, rest) = url.split_once("://").ok_or_else(|| invalid("not a URL"))?;
        let scheme = scheme.to_ascii_lowercase();
        install_crypto();
        let rt = runtime()?;
        let _guard = rt.enter();
        let (store, location): (Arc<dyn ObjectStore>, _) = if scheme == "s3" {
            let (bucket, key) = rest
                .split_once('/')
                .filter(|(b, k)| !b.is_empty() && !k.is_empty())
                .ok_or_else(|| invalid("an S3 URL is s3://bucket/key"))?;
            let (store, _) = s3_store(bucket)?;
            let location = object_store::path::Path::parse(key)
                .map_err(|e| invalid(format!("invalid object key: {e}")))?;
            (store, location)
        } else {
            if rest.contains('?') || rest.contains('#') {
                return Err(invalid(
                    "URLs with a query string or fragment are not supported",
                ));
            }
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            if path.len() <= 1 {
                return Err(invalid("the URL names no file"));
            }
            let store = object_store::http::HttpBuilder::new()
                .with_url(format!("{scheme}://{authority}"))
                .with_retry(retry())
                .with_client_options(
                    object_store::ClientOptions::new().with_allow_http(scheme == "http"),
                )
                .build()
                .map_err(|e| invalid(format!("bad URL: {}", scrub(e.to_string()))))?;
            let location = object_store::path::Path::from_url_path(&path[1..])
                .map_err(|e| invalid(format!("invalid path: {e}")))?;
            (Arc::new(store) as Arc<dyn ObjectStore>, location)
        };
        REQUESTS.fetch_add(1, Ordering::Relaxed);
        let meta = rt
            .block_on(store.head(&location))
            .map_err(|e| describe(&e))?;
        Ok(Arc::new(Self {
            store,
            location,
            size: meta.size,
            e_tag: meta.e_tag,
            rt: Arc::clone(&rt),
            cache: Mutex::new(VecDeque::new()),
        }))
    }

    /// Drops this object from the ones reused by [`Remote::open`].
    fn forget(&self) {
        let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
        opened.retain(|(_, _, r)| !std::ptr::eq(Arc::as_ptr(r), self));
    }

    /// The cached window holding `pos`, if any.
    fn cached(&self, pos: u64) -> Option<(u64, Bytes)> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .iter()
            .rev()
            .find(|(start, b)| *start <= pos && pos < start + b.len() as u64)
            .cloned()
    }

    /// `end`, or the start of the first cached window after `start` if that comes first (a fetch
    /// stops where bytes are already here).
    fn clip(&self, start: u64, end: u64) -> u64 {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .iter()
            .map(|(s, _)| *s)
            .filter(|&s| s > start)
            .fold(end, u64::min)
    }

    /// Keeps a fetched window for the object's other readers if it is small ([`CACHED_WINDOW`]).
    fn keep(&self, start: u64, bytes: &Bytes) {
        let len = bytes.len() as u64;
        if len == 0 || len > CACHED_WINDOW {
            return;
        }
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.push_back((start, bytes.clone()));
        let mut total: u64 = cache.iter().map(|(_, b)| b.len() as u64).sum();
        while total > CACHE_BYTES {
            match cache.pop_front() {
                Some((_, b)) => total -= b.len() as u64,
                None => break,
            }
        }
    }

    /// The object's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    fn fetch(
        &self,
        start: u64,
        end: u64,
        counter: Option<Arc<AtomicU64>>,
    ) -> tokio::task::JoinHandle<object_store::Result<Bytes>> {
        let store = Arc::clone(&self.store);
        let location = self.location.clone();
        let e_tag = self.e_tag.clone();
        REQUESTS.fetch_add(1, Ordering::Relaxed);
        if std::env::var_os("SORTASE_REMOTE_TRACE").is_some_and(|v| v == "1") {
            eprintln!(
                "sortase: remote: GET bytes {start}-{end} ({} bytes)",
                end - start
            );
        }
        self.rt.spawn(async move {
            let options = object_store::GetOptions::new()
                .with_range(Some(start..end))
                .with_if_match(e_tag);
            let bytes = store.get_opts(&location, options).await?.bytes().await?;
            FETCHED_BYTES.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            if let Some(c) = counter {
                c.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            }
            Ok(bytes)
        })
    }
}

/// Fetches of a window again after its body came short or broke off.
const BODY_RETRIES: u32 = 3;

/// A window being fetched.
struct Pending {
    start: u64,
    end: u64,
    task: tokio::task::JoinHandle<object_store::Result<Bytes>>,
}

/// `Read + Seek` over a remote object: windows of bytes fetched by range, read ahead while reading
/// is sequential (see the crate's documentation).
pub struct RemoteReader {
    remote: Arc<Remote>,
    pos: u64,
    buf: Bytes,
    buf_start: u64,
    pending: VecDeque<Pending>,
    window: u64,
    /// Where reading is expected to stop ([`Source::expect_end`]); `u64::MAX`: the object's end.
    expected_end: u64,
    /// Where its fetched bytes are also counted (a task's [`Aliases`]).
    counter: Option<Arc<AtomicU64>>,
    /// The byte ranges its task reads ([`alias_paths`]).
    planned: Option<Arc<Vec<(u64, u64)>>>,
}

impl RemoteReader {
    /// A reader at the start of `remote`.
    pub fn new(remote: Arc<Remote>) -> Self {
        Self {
            remote,
            pos: 0,
            buf: Bytes::new(),
            buf_start: 0,
            pending: VecDeque::new(),
            window: MIN_WINDOW,
            expected_end: u64::MAX,
            counter: None,
            planned: None,
        }
    }

    fn drop_pending(&mut self) {
        for p in self.pending.drain(..) {
            p.task.abort();
        }
    }

    /// Makes `buf` hold `pos` (`pos` is within the object).
    fn fill(&mut self) -> io::Result<()> {
        if self.pos >= self.expected_end {
            self.expected_end = u64::MAX;
        }
        // Where reading is expected to stop: the caller's end, else the end of the planned range
        // holding the position.
        let planned_end = self.planned.as_ref().and_then(|p| {
            p.iter()
                .find(|&&(a, b)| a <= self.pos && self.pos < b)
                .map(|&(_, b)| b.min(self.remote.size))
        });
        let limit = match planned_end {
            Some(end) if self.expected_end == u64::MAX => end,
            _ => self.expected_end,
        };
        // Fetches end there (at least a minimal window), else at the object's end.
        let stop = limit.max(self.pos + MIN_WINDOW).min(self.remote.size);
        let buf_end = self.buf_start + self.buf.len() as u64;
        let sequential = !self.buf.is_empty() && self.pos == buf_end;
        // Reading from here to an expected end more than a read-ahead window away.
        let ranged = limit != u64::MAX && limit > self.pos + READ_AHEAD_FROM;
        let next = match self.pending.front() {
            Some(p) if p.start == self.pos => self.pending.pop_front(),
            _ => None,
        };
        let next = match next {
            Some(p) => {
                self.window = (self.window * 2).min(MAX_WINDOW);
                p
            }
            None => {
                self.drop_pending();
                if let Some((start, bytes)) = self.remote.cached(self.pos) {
                    // Another reader of the object fetched these bytes.
                    self.buf_start = start;
                    self.buf = bytes;
                    return Ok(());
                }
                self.window = if sequential {
                    (self.window * 2).min(MAX_WINDOW)
                } else if limit != u64::MAX {
                    // A range reader reads on to its end: one window to there, up to the largest
                    // (few requests: a store's cost is per request more than per byte).
                    (limit.saturating_sub(self.pos)).clamp(MIN_WINDOW, MAX_WINDOW)
                } else {
                    MIN_WINDOW
                };
                let end = self
                    .remote
                    .clip(self.pos, (self.pos + self.window).min(stop));
                Pending {
                    start: self.pos,
                    end,
                    task: self.remote.fetch(self.pos, end, self.counter.clone()),
                }
            }
        };
        if (sequential || ranged) && self.window >= READ_AHEAD_FROM {
            self.read_ahead(next.end, stop);
        }
        let (start, end) = (next.start, next.end);
        let mut attempt = 0;
        let mut result = self.wait(next);
        let bytes = loop {
            let (failure, transient) = match result {
                Ok(bytes) if bytes.len() as u64 == end - start => break bytes,
                Ok(bytes) => (
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "a ranged read returned {} of {} bytes",
                            bytes.len(),
                            end - start
                        ),
                    ),
                    true,
                ),
                Err(e) => e,
            };
            // A body cut short or a connection lost mid-body (what the store's own retries,
            // which cover the request, do not): fetched again after a back-off.
            if attempt == BODY_RETRIES || !transient {
                return Err(failure);
            }
            std::thread::sleep(Duration::from_millis(100 << attempt));
            attempt += 1;
            result = self.wait(Pending {
                start,
                end,
                task: self.remote.fetch(start, end, self.counter.clone()),
            });
        };
        self.remote.keep(start, &bytes);
        self.buf_start = start;
        self.buf = bytes;
        Ok(())
    }

    /// Queues fetches of the next windows after `end` (or after the last pending one), up to
    /// `READ_AHEAD` of them, none past `stop`.
    fn read_ahead(&mut self, end: u64, stop: u64) {
        let mut at = self.pending.back().map_or(end, |p| p.end);
        while self.pending.len() < READ_AHEAD && at < stop {
            let to = (at + self.window).min(stop);
            self.pending.push_back(Pending {
                start: at,
                end: to,
                task: self.remote.fetch(at, to, self.counter.clone()),
            });
            at = to;
        }
    }

    /// The bytes of a fetch, once done; an error says whether fetching again may succeed (not for
    /// a missing object, a refusal or a new version of the object).
    fn wait(&self, pending: Pending) -> Result<Bytes, (io::Error, bool)> {
        use object_store::Error as E;
        self.remote
            .rt
            .block_on(pending.task)
            .map_err(|e| (io::Error::other(format!("fetch task failed: {e}")), false))?
            .map_err(|e| {
                if matches!(e, E::Precondition { .. }) {
                    // A new version: the next opening of the URL asks for its size again.
                    self.remote.forget();
                }
                let error = describe(&e);
                let lasting = matches!(
                    e,
                    E::NotFound { .. }
                        | E::Precondition { .. }
                        | E::PermissionDenied { .. }
                        | E::Unauthenticated { .. }
                ) || matches!(
                    error.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
                );
                (error, !lasting)
            })
    }
}

impl Drop for RemoteReader {
    fn drop(&mut self) {
        self.drop_pending();
    }
}

impl Read for RemoteReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos >= self.remote.size || out.is_empty() {
            return Ok(0);
        }
        let buf_end = self.buf_start + self.buf.len() as u64;
        if self.pos < self.buf_start || self.pos >= buf_end {
            self.fill()?;
        }
        let at = (self.pos - self.buf_start) as usize;
        let n = out.len().min(self.buf.len() - at);
        out[..n].copy_from_slice(&self.buf[at..at + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for RemoteReader {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let to = match pos {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.remote.size.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = to.ok_or_else(|| invalid("seek before the start of the object"))?;
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_recognised_and_redacted() {
        assert!(is_url("s3://b/k.bam"));
        assert!(is_url("HTTPS://h/x.bam"));
        assert!(!is_url("x.bam"));
        assert!(!is_url("/data/s3://x"));
        assert_eq!(redacted("https://u:p@h:1/x.bam"), "https://h:1/x.bam");
        assert_eq!(redacted("s3://b/k"), "s3://b/k");
    }

    #[test]
    fn aliases_and_secrets_follow_the_options_until_cleared() {
        let local = "/scratch/in/0/x.bam";
        assert!(!is_remote(local));
        set_s3_options(Some(S3Options {
            access_key_id: Some("AKIDEXAMPLE".into()),
            secret_access_key: Some("very-secret-value".into()),
            aliases: vec![(local.into(), "s3://bkt/x.bam".into())],
            ..Default::default()
        }));
        assert!(is_remote(local));
        let url = |p: &str| alias(p).map(|a| a.url);
        assert_eq!(url(local).as_deref(), Some("s3://bkt/x.bam"));
        assert!(!is_remote("/scratch/in/0/y.bam"));
        assert_eq!(
            scrub("denied for very-secret-value".into()),
            "denied for ***"
        );

        // Tasks' aliases: side by side, each with its own count, gone with their guard; new
        // settings keep every alias.
        let (a, b) = ("/scratch/task-a/x.bam", "/scratch/task-b/x.bam");
        let first = alias_paths([(a.to_string(), "s3://bkt/a.bam".to_string(), None)]);
        let second = alias_paths([(
            b.to_string(),
            "s3://bkt/b.bam".to_string(),
            Some(vec![(0, 10)]),
        )]);
        use_s3_settings(S3Options {
            region: Some("eu-west-1".into()),
            ..Default::default()
        });
        assert_eq!(url(a).as_deref(), Some("s3://bkt/a.bam"));
        assert_eq!(url(b).as_deref(), Some("s3://bkt/b.bam"));
        assert_eq!(url(local).as_deref(), Some("s3://bkt/x.bam"));
        let (ca, cb) = (alias(a).unwrap().fetched, alias(b).unwrap().fetched);
        let (ca, cb) = (ca.unwrap(), cb.unwrap());
        assert!(!Arc::ptr_eq(&ca, &cb) && alias(local).unwrap().fetched.is_none());
        assert_eq!(*alias(a).unwrap().planned.unwrap(), vec![(0, u64::MAX)]);
        assert_eq!(*alias(b).unwrap().planned.unwrap(), vec![(0, 10)]);
        ca.fetch_add(7, Ordering::Relaxed);
        assert_eq!((first.fetched(), second.fetched()), (7, 0));
        drop(first);
        assert_eq!(url(a), None);
        assert_eq!(url(b).as_deref(), Some("s3://bkt/b.bam"));
        drop(second);

        set_s3_options(None);
        assert!(!is_remote(local));
        assert_eq!(url(local), None);
    }

    #[test]
    fn ini_sections() {
        let dir = std::env::temp_dir().join(format!("sortase-io-ini-{}", std::process::id()));
        std::fs::write(
            &dir,
            "[default]\nregion = eu-west-1\n[profile p]\nregion=us-east-2\n",
        )
        .unwrap();
        assert_eq!(
            ini_value(&dir, "default", "region").as_deref(),
            Some("eu-west-1")
        );
        assert_eq!(
            ini_value(&dir, "profile p", "region").as_deref(),
            Some("us-east-2")
        );
        assert_eq!(ini_value(&dir, "profile q", "region"), None);
        std::fs::remove_file(&dir).unwrap();
    }
}
