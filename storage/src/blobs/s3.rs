//! The S3 backend: where a bucket is ([`S3Location`], parsed from
//! `s3://BUCKET[/PREFIX]?endpoint=URL&region=NAME`), the credentials it is opened with, and
//! the client settings (timeouts, bounded retries with backoff) every request goes through.
//!
//! Credentials come from `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (and
//! `AWS_SESSION_TOKEN`), or else from the shared credentials file
//! (`AWS_SHARED_CREDENTIALS_FILE`, default `~/.aws/credentials`, profile `AWS_PROFILE` or
//! `default`), or from the file `weft serve --s3-credentials-file` names; never from the
//! command line, and neither the location's `Display` nor any error
//! carries them.
//!
//! What the bucket must allow: GetObject, PutObject, DeleteObject, ListBucket, CopyObject and
//! the multipart calls (CreateMultipartUpload, UploadPart, CompleteMultipartUpload,
//! AbortMultipartUpload) under the prefix. No conditional writes are needed: a blob's key is
//! its digest, so two copies to one key carry the same bytes (`blobs.rs`, `promote`).

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::prefix::PrefixStore;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt as _, RetryConfig};

use crate::error::Error;

/// Seconds to open a connection to the store.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Seconds one request may take in all (a part of up to 8 MiB, a copy of a large object).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Retries of a failed request (connection refused, 5xx, timeout), with exponential backoff
/// from 100 ms up to 2 s, and never past [`RETRY_TIMEOUT`] since the first try: a store that
/// is down is reported in a few seconds (`503 blob_store_unavailable`), not minutes.
const MAX_RETRIES: usize = 4;
const RETRY_TIMEOUT: Duration = Duration::from_secs(10);

/// A bucket (and a key prefix inside it) on an S3-compatible store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    /// Keys are written under this prefix (no leading or trailing `/`; empty: the root).
    pub prefix: String,
    /// The store's address (`http://127.0.0.1:3900` for a local Garage); `None`: AWS S3.
    pub endpoint: Option<String>,
    pub region: String,
    /// Read the access keys from this file (the shared credentials format) instead of the
    /// environment: `weft serve --s3-credentials-file`, and the tests.
    pub credentials_file: Option<std::path::PathBuf>,
    /// How long one request may take in all (`timeout=`); `None`: [`REQUEST_TIMEOUT`].
    pub timeout: Option<Duration>,
    /// How long opening a connection may take (`connect_timeout=`); `None`:
    /// [`CONNECT_TIMEOUT`].
    pub connect_timeout: Option<Duration>,
}

/// `300ms`, `2s` or `2` (seconds): a timeout in an S3 location's query.
fn parse_timeout(name: &str, value: &str) -> Result<Duration, String> {
    let parsed = if let Some(ms) = value.strip_suffix("ms") {
        ms.parse().ok().map(Duration::from_millis)
    } else {
        value
            .strip_suffix('s')
            .unwrap_or(value)
            .parse()
            .ok()
            .map(Duration::from_secs)
    };
    parsed
        .filter(|timeout| !timeout.is_zero() && *timeout <= Duration::from_secs(3600))
        .ok_or_else(|| {
            format!("{name}={value}: expected a duration such as 300ms or 30s, at most an hour")
        })
}

impl std::fmt::Display for S3Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}", self.bucket)?;
        if !self.prefix.is_empty() {
            write!(f, "/{}", self.prefix)?;
        }
        write!(f, "?region={}", self.region)?;
        if let Some(endpoint) = &self.endpoint {
            write!(f, "&endpoint={endpoint}")?;
        }
        if let Some(timeout) = self.timeout {
            write!(f, "&timeout={}ms", timeout.as_millis())?;
        }
        if let Some(timeout) = self.connect_timeout {
            write!(f, "&connect_timeout={}ms", timeout.as_millis())?;
        }
        Ok(())
    }
}

impl std::str::FromStr for S3Location {
    type Err = String;

    /// `s3://BUCKET[/PREFIX][?endpoint=URL][&region=NAME][&timeout=D][&connect_timeout=D]`;
    /// the region defaults to `AWS_REGION`, else `us-east-1`; a duration is `300ms` or `30s`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let rest = text
            .strip_prefix("s3://")
            .ok_or_else(|| format!("{text:?}: an S3 location starts with s3://"))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
        let valid_bucket = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !valid_bucket {
            return Err(format!(
                "{bucket:?} is not a bucket name (3 to 63 of a-z, 0-9, '-' and '.')"
            ));
        }
        let prefix = prefix.trim_matches('/').to_owned();
        if prefix.split('/').any(|part| part == "." || part == "..") {
            return Err(format!("the prefix {prefix:?} may not hold . or .."));
        }
        let mut endpoint = None;
        let mut region = None;
        let mut timeout = None;
        let mut connect_timeout = None;
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            match pair.split_once('=') {
                Some(("endpoint", value)) if !value.is_empty() => {
                    if !(value.starts_with("http://") || value.starts_with("https://")) {
                        return Err(format!("endpoint {value:?}: expected http:// or https://"));
                    }
                    endpoint = Some(value.trim_end_matches('/').to_owned());
                }
                Some(("region", value)) if !value.is_empty() => region = Some(value.to_owned()),
                Some(("timeout", value)) => timeout = Some(parse_timeout("timeout", value)?),
                Some(("connect_timeout", value)) => {
                    connect_timeout = Some(parse_timeout("connect_timeout", value)?);
                }
                _ => {
                    return Err(format!(
                        "{pair:?}: an S3 location takes endpoint=, region=, timeout= and \
                         connect_timeout= only \
                         (credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY \
                         or the shared credentials file)"
                    ));
                }
            }
        }
        let region = region
            .or_else(|| std::env::var("AWS_REGION").ok())
            .unwrap_or_else(|| "us-east-1".to_owned());
        Ok(Self {
            bucket: bucket.to_owned(),
            prefix,
            endpoint,
            region,
            credentials_file: None,
            timeout,
            connect_timeout,
        })
    }
}

/// An access key pair (never printed: `Debug` hides the secret).
struct Credentials {
    key_id: String,
    secret: String,
    token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

fn credentials(location: &S3Location) -> Result<Credentials, Error> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(file) = &location.credentials_file {
        let profile = env("AWS_PROFILE").unwrap_or_else(|| "default".to_owned());
        return credentials_from(file, &profile);
    }
    if let (Some(key_id), Some(secret)) = (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
        return Ok(Credentials {
            key_id,
            secret,
            token: env("AWS_SESSION_TOKEN"),
        });
    }
    let file = env("AWS_SHARED_CREDENTIALS_FILE")
        .map(std::path::PathBuf::from)
        .or_else(|| env("HOME").map(|home| std::path::Path::new(&home).join(".aws/credentials")));
    let profile = env("AWS_PROFILE").unwrap_or_else(|| "default".to_owned());
    let Some(file) = file else {
        return Err(no_credentials("no HOME to find ~/.aws/credentials in"));
    };
    credentials_from(&file, &profile)
}

fn credentials_from(file: &std::path::Path, profile: &str) -> Result<Credentials, Error> {
    let text = std::fs::read_to_string(file)
        .map_err(|error| no_credentials(&format!("{}: {error}", file.display())))?;
    parse_credentials_file(&text, profile).ok_or_else(|| {
        no_credentials(&format!(
            "{} has no aws_access_key_id and aws_secret_access_key in [{profile}]",
            file.display()
        ))
    })
}

fn no_credentials(why: &str) -> Error {
    Error::Config(format!(
        "the S3 blob store needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
         or a shared credentials file ({why})"
    ))
}

/// The keys of `[profile]` in an AWS shared credentials file (INI).
fn parse_credentials_file(text: &str, profile: &str) -> Option<Credentials> {
    let mut in_profile = false;
    let (mut key_id, mut secret, mut token) = (None, None, None);
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_profile = name.trim() == profile;
            continue;
        }
        if !in_profile {
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            let value = value.trim().to_owned();
            match key.trim() {
                "aws_access_key_id" => key_id = Some(value),
                "aws_secret_access_key" => secret = Some(value),
                "aws_session_token" => token = Some(value),
                _ => {}
            }
        }
    }
    Some(Credentials {
        key_id: key_id?,
        secret: secret?,
        token,
    })
}

/// The store for `location`: a client with bounded retries, every key under its prefix.
pub(crate) fn open(location: &S3Location) -> Result<Arc<PrefixStore<AmazonS3>>, Error> {
    let credentials = credentials(location)?;
    let mut builder = AmazonS3Builder::new()
        .with_bucket_name(&location.bucket)
        .with_region(&location.region)
        .with_access_key_id(credentials.key_id)
        .with_secret_access_key(credentials.secret)
        .with_client_options(
            ClientOptions::new()
                .with_connect_timeout(location.connect_timeout.unwrap_or(CONNECT_TIMEOUT))
                .with_timeout(location.timeout.unwrap_or(REQUEST_TIMEOUT))
                .with_allow_http(
                    location
                        .endpoint
                        .as_deref()
                        .is_some_and(|e| e.starts_with("http://")),
                ),
        )
        .with_retry(RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: MAX_RETRIES,
            retry_timeout: RETRY_TIMEOUT,
        });
    if let Some(token) = credentials.token {
        builder = builder.with_token(token);
    }
    if let Some(endpoint) = &location.endpoint {
        builder = builder.with_endpoint(endpoint);
    }
    let store = builder
        .build()
        .map_err(|error| Error::Config(format!("S3 blob store {location}: {error}")))?;
    Ok(Arc::new(PrefixStore::new(store, location.prefix.as_str())))
}

/// Whether the store answers and lets these credentials read the bucket: a HEAD of a key
/// that is never written, which it must answer with NotFound. A server whose blob store is
/// down or refuses its credentials does not start.
pub(super) async fn check_reachable(store: &dyn ObjectStore) -> Result<(), Error> {
    match store
        .head(&object_store::path::Path::from("weft-reachability-probe"))
        .await
    {
        Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(error) => Err(Error::Config(format!(
            "the S3 blob store cannot be used: {error}"
        ))),
    }
}

/// Places staged bytes at their digest's key on a store without a create-if-absent copy (S3
/// as Garage speaks it): a HEAD, then a server-side copy, then (a one-shot upload's) the
/// staged object's deletion. Two uploads of one digest racing between the HEAD and the copy
/// both copy the same verified bytes, so the object is right whichever lands last; both then
/// report it stored, which only matters to the engine's undo of a failed
/// promotion removes the object only if no row names it, after every upload between its
/// promotion and its row has finished (`artifacts/upload.rs`).
pub(super) async fn place_by_copy(
    store: &dyn ObjectStore,
    from: &object_store::path::Path,
    to: &object_store::path::Path,
    session: bool,
) -> Result<(), object_store::Error> {
    match store.head(to).await {
        Ok(meta) => {
            return Err(object_store::Error::AlreadyExists {
                path: meta.location.to_string(),
                source: "the blob is stored already".into(),
            });
        }
        Err(object_store::Error::NotFound { .. }) => {}
        Err(error) => return Err(error),
    }
    store.copy(from, to).await?;
    if !session && let Err(error) = store.delete(from).await {
        tracing::warn!(%from, %error, "could not delete a promoted staged object");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_read_as_written() {
        let location: S3Location =
            "s3://weft-blobs/team/a?endpoint=http://127.0.0.1:3900/&region=garage"
                .parse()
                .expect("valid");
        assert_eq!(location.bucket, "weft-blobs");
        assert_eq!(location.prefix, "team/a");
        assert_eq!(location.endpoint.as_deref(), Some("http://127.0.0.1:3900"));
        assert_eq!(location.region, "garage");
        assert_eq!(
            location.to_string(),
            "s3://weft-blobs/team/a?region=garage&endpoint=http://127.0.0.1:3900"
        );
        assert_eq!((location.timeout, location.connect_timeout), (None, None));
        let tuned: S3Location = "s3://weft-blobs?timeout=300ms&connect_timeout=5s"
            .parse()
            .expect("valid");
        assert_eq!(tuned.timeout, Some(Duration::from_millis(300)));
        assert_eq!(tuned.connect_timeout, Some(Duration::from_secs(5)));
        assert_eq!(tuned.to_string().parse::<S3Location>(), Ok(tuned));
        for bad in [
            "weft",
            "s3://A",
            "s3://ok-bucket?secret=x",
            "s3://ok-bucket/../x",
            "s3://ok-bucket?endpoint=ftp://x",
            "s3://ok-bucket?timeout=0s",
            "s3://ok-bucket?timeout=soon",
            "s3://ok-bucket?connect_timeout=2h",
        ] {
            assert!(bad.parse::<S3Location>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_shared_credentials_file_is_read_by_profile() {
        let text = "[default]\naws_access_key_id = A\naws_secret_access_key = B\n\n\
                    [other]\naws_access_key_id=C\naws_secret_access_key=D\naws_session_token=T\n";
        let default = parse_credentials_file(text, "default").expect("default");
        assert_eq!(
            (default.key_id.as_str(), default.secret.as_str()),
            ("A", "B")
        );
        let other = parse_credentials_file(text, "other").expect("other");
        assert_eq!(other.token.as_deref(), Some("T"));
        assert!(parse_credentials_file(text, "missing").is_none());
        assert!(
            !format!("{default:?}").contains('B'),
            "the secret is never printed"
        );
    }
}
