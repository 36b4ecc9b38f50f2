//! The PostgreSQL side of the floor: [`Pg`], one connection driven on its caller's thread
//! (`pipeline.rs`) with its cache of prepared statements (each translated once by `dialect.rs`); how
//! the floor's values are bound to the type each parameter is declared with ([`Bind`]) and
//! read back from whatever type a column has ([`Column`]).

use std::cell::RefCell;
use std::collections::HashMap;

use bytes::BytesMut;
use postgres::types::{IsNull, Kind, ToSql, Type, to_sql_checked};

use std::future::Future;
use std::sync::Arc;

use tokio_postgres::Client;

use super::ahead::Slot;
use super::pipeline::Link;
use super::value::{Result, SqlError, ValueRef};

/// One connection to PostgreSQL and its prepared statements, by the SQL they were written in.
pub(crate) struct Pg {
    /// `None` only while dropping (see `Drop`).
    link: RefCell<Option<Link>>,
    statements: RefCell<HashMap<String, Vec<(Kinds, postgres::Statement)>>>,
    in_transaction: std::cell::Cell<bool>,
    /// Facts learnt from what this connection read that stay true (`lasting.rs`).
    pub(super) lasting: super::lasting::Lasting,
}

impl Pg {
    /// Connects to `url` (`postgres://user@host:port/database`, without TLS: a loopback or
    /// private network; `sslmode` is not supported).
    pub(crate) fn connect(url: &str) -> Result<Self> {
        let link = off_runtime(|| -> Result<Link> {
            let mut link = Link::connect(url)?;
            let client = link.client();
            // A Group's lock held by a stalled server, or a transaction left open, fails
            // the waiting job (503, retry) instead of stopping every writer.
            link.request(client.batch_execute(
                "SET lock_timeout = '10s'; SET idle_in_transaction_session_timeout = '60s'",
            ))?;
            Ok(link)
        })?;
        Ok(Self {
            link: RefCell::new(Some(link)),
            statements: RefCell::new(HashMap::new()),
            in_transaction: std::cell::Cell::new(false),
            lasting: super::lasting::Lasting::default(),
        })
    }

    /// Whether a transaction begun with `BEGIN` is still open.
    pub(crate) fn in_transaction(&self) -> bool {
        self.in_transaction.get()
    }

    /// Whether the server went away (the connection must be replaced).
    pub(crate) fn is_closed(&self) -> bool {
        self.link.borrow().as_ref().is_none_or(Link::is_closed)
    }

    fn link(&self) -> std::cell::RefMut<'_, Link> {
        std::cell::RefMut::map(self.link.borrow_mut(), |link| {
            link.as_mut()
                .expect("a connection is only taken by its drop")
        })
    }

    /// Runs the request `make` builds with the client, behind the changes sent before it.
    fn request<T, F>(&self, make: impl FnOnce(Arc<Client>) -> F) -> Result<T>
    where
        F: Future<Output = std::result::Result<T, postgres::Error>>,
    {
        let mut link = self.link();
        let request = make(link.client());
        Ok(link.request(request)?)
    }

    /// The prepared statement for `sql` with parameters of the kinds `bound` has. Each
    /// parameter is declared with its value's type (`BIGINT`, `TEXT`, `BYTEA`, `FLOAT8`), as
    /// SQLite takes any value anywhere: PostgreSQL cannot infer a type for a parameter that
    /// appears only in `?N IS NULL`. A NULL is left for PostgreSQL to infer, and declared
    /// `TEXT` when it cannot. One statement per SQL text and kinds of parameters.
    fn statement(&self, sql: &str, bound: &[ValueRef<'_>]) -> Result<postgres::Statement> {
        let kinds: Kinds = bound.iter().map(|value| kind_of(*value)).collect();
        if let Some(known) = self.statements.borrow().get(sql)
            && let Some((_, statement)) = known.iter().find(|(k, _)| *k == kinds)
        {
            return Ok(statement.clone());
        }
        let translated = super::dialect::translate(sql);
        let types = |null: Type| -> Vec<Type> {
            kinds
                .iter()
                .map(|kind| match kind {
                    Some(ty) => ty.clone(),
                    None => null.clone(),
                })
                .collect()
        };
        let unspecified = Type::new(String::new(), 0, Kind::Simple, String::new());
        // A failed PREPARE aborts an open transaction: the first try runs in a savepoint.
        let guarded = self.in_transaction() && kinds.iter().any(Option::is_none);
        // What was sent ahead is answered first, so its error is not taken for this
        // statement's preparation.
        self.settle()?;
        // The guard's statements are part of the preparation: not counted by the meter.
        let guard = |sql: &str| {
            let mut link = self.link();
            let client = link.client();
            link.request_uncounted(async { client.batch_execute(sql).await })
        };
        if guarded {
            guard("SAVEPOINT weft_prepare")?;
        }
        let prepare = |types: Vec<Type>| {
            let mut link = self.link();
            let client = link.client();
            link.request_uncounted(async { client.prepare_typed(&translated, &types).await })
        };
        let mut prepared = prepare(types(unspecified));
        if guarded {
            let end = if prepared.is_ok() {
                "RELEASE weft_prepare"
            } else {
                "ROLLBACK TO weft_prepare; RELEASE weft_prepare"
            };
            guard(end)?;
        }
        if let Err(error) = &prepared
            && matches!(
                error.code(),
                Some(
                    &postgres::error::SqlState::INDETERMINATE_DATATYPE
                        | &postgres::error::SqlState::AMBIGUOUS_PARAMETER
                )
            )
        {
            prepared = prepare(types(Type::TEXT));
        }
        let statement = prepared.map_err(|source| SqlError::Prepare {
            sql: translated.clone(),
            source,
        })?;
        self.statements
            .borrow_mut()
            .entry(sql.to_owned())
            .or_default()
            .push((kinds, statement.clone()));
        Ok(statement)
    }

    pub(crate) fn query(&self, sql: &str, bound: &[ValueRef<'_>]) -> Result<Vec<postgres::Row>> {
        let statement = self.statement(sql, bound)?;
        let rows = self.request(|client| async move {
            with_params(bound, async |params| client.query(&statement, params).await).await
        })?;
        super::meter::count_postgres(sql, bound, rows.len());
        Ok(rows)
    }

    pub(crate) fn execute(&self, sql: &str, bound: &[ValueRef<'_>]) -> Result<u64> {
        let statement = self.statement(sql, bound)?;
        let changed = self.request(|client| async move {
            with_params(bound, async |params| {
                client.execute(&statement, params).await
            })
            .await
        })?;
        super::meter::count_postgres(sql, bound, 0);
        Ok(changed)
    }

    /// Sends a change whose count nobody reads; its answer is read with the next request's
    /// (`pipeline.rs`), and its error is that request's.
    pub(crate) fn execute_later(&self, sql: &str, bound: &[ValueRef<'_>]) -> Result<()> {
        let statement = self.statement(sql, bound)?;
        let owned: Vec<Owned> = bound.iter().map(|value| Owned::from(*value)).collect();
        let mut link = self.link();
        let client = link.client();
        link.send(
            async move {
                let binds: Vec<Bind<'_>> = owned.iter().map(|value| Bind(value.as_ref())).collect();
                let params: Vec<&(dyn ToSql + Sync)> = binds
                    .iter()
                    .map(|bind| bind as &(dyn ToSql + Sync))
                    .collect();
                client.execute(&statement, &params).await.map(|_| ())
            },
            false,
        )?;
        super::meter::count_postgres(sql, bound, 0);
        Ok(())
    }

    /// Sends a read whose rows the returned slot receives once its answer is read
    /// (`ahead.rs`).
    pub(crate) fn query_ahead(&self, sql: &str, bound: &[ValueRef<'_>]) -> Result<Slot> {
        let statement = self.statement(sql, bound)?;
        let owned: Vec<Owned> = bound.iter().map(|value| Owned::from(*value)).collect();
        let slot = Slot::default();
        let answer = Arc::clone(&slot);
        let mut link = self.link();
        let client = link.client();
        link.send(
            async move {
                let binds: Vec<Bind<'_>> = owned.iter().map(|value| Bind(value.as_ref())).collect();
                let params: Vec<&(dyn ToSql + Sync)> = binds
                    .iter()
                    .map(|bind| bind as &(dyn ToSql + Sync))
                    .collect();
                let rows = client.query(&statement, &params).await?;
                super::meter::count_rows(rows.len());
                *answer
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(rows);
                Ok(())
            },
            false,
        )?;
        super::meter::count_postgres(sql, bound, 0);
        Ok(slot)
    }

    /// Sends statements without parameters (a savepoint's) whose answer nobody reads.
    pub(crate) fn batch_later(&self, sql: &str) -> Result<()> {
        let owned = sql.to_owned();
        let mut link = self.link();
        let client = link.client();
        link.send(async move { client.batch_execute(&owned).await }, true)?;
        super::meter::count_postgres(sql, &[], 0);
        Ok(())
    }

    /// Whether a control statement sent ahead (`batch_later`) failed since the last call.
    pub(crate) fn take_control_failure(&self) -> bool {
        self.link().take_control_failure()
    }

    /// Reads the answers of the changes sent ahead: the first one's error, if any failed.
    pub(crate) fn settle(&self) -> Result<()> {
        if !self.link().has_sent() {
            return Ok(());
        }
        self.request(|_| async { Ok(()) })
    }

    /// Notifications on the channels this connection listens to (`LISTEN`): waits up to
    /// `timeout` for the first, then takes those already here; their payloads, in order.
    pub(crate) fn notifications(&self, timeout: std::time::Duration) -> Result<Vec<String>> {
        self.link().notifications(timeout)
    }

    /// Statements without parameters, sent as they are (transaction control, DDL).
    pub(crate) fn batch(&self, sql: &str) -> Result<()> {
        let outcome = self.request(|client| async move { client.batch_execute(sql).await });
        super::meter::count_postgres(sql, &[], 0);
        let head = sql.trim_start().to_ascii_uppercase();
        if head.starts_with("BEGIN") {
            self.in_transaction.set(outcome.is_ok());
        } else if head.starts_with("COMMIT") || head.starts_with("ROLLBACK;") || head == "ROLLBACK"
        {
            // A failed COMMIT ends the transaction too (PostgreSQL rolls it back).
            self.in_transaction.set(false);
        }
        outcome
    }
}

impl Drop for Pg {
    /// Closing says goodbye through the connection's own runtime, which must not run on a
    /// thread that drives async tasks: there it is closed on a thread of its own.
    fn drop(&mut self) {
        if let Some(link) = self.link.get_mut().take() {
            off_runtime(move || link.close());
        }
    }
}

/// Runs `f` where the synchronous client may block: here, or, on a thread that is inside a
/// Tokio runtime (the client runs its own, which cannot start inside another), on a scoped
/// thread of its own.
pub(crate) fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|scope| match scope.spawn(f).join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// The declared types of a statement's parameters (`None`: a NULL, left to PostgreSQL).
type Kinds = smallvec::SmallVec<[Option<Type>; 8]>;

fn kind_of(value: ValueRef<'_>) -> Option<Type> {
    match value {
        ValueRef::Null => None,
        ValueRef::Integer(_) => Some(Type::INT8),
        ValueRef::Real(_) => Some(Type::FLOAT8),
        ValueRef::Text(_) => Some(Type::TEXT),
        ValueRef::Blob(_) => Some(Type::BYTEA),
    }
}

/// Runs `f` with `bound` as the client's parameters.
async fn with_params<R>(
    bound: &[ValueRef<'_>],
    f: impl AsyncFnOnce(&[&(dyn ToSql + Sync)]) -> R,
) -> R {
    let binds: Vec<Bind<'_>> = bound.iter().map(|value| Bind(*value)).collect();
    let params: Vec<&(dyn ToSql + Sync)> = binds
        .iter()
        .map(|bind| bind as &(dyn ToSql + Sync))
        .collect();
    f(&params).await
}

/// A bound value owned by a change sent ahead (`Pg::execute_later`).
enum Owned {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl From<ValueRef<'_>> for Owned {
    fn from(value: ValueRef<'_>) -> Self {
        match value {
            ValueRef::Null => Self::Null,
            ValueRef::Integer(n) => Self::Integer(n),
            ValueRef::Real(x) => Self::Real(x),
            ValueRef::Text(text) => Self::Text(text.to_owned()),
            ValueRef::Blob(bytes) => Self::Blob(bytes.to_vec()),
        }
    }
}

impl Owned {
    fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Self::Null => ValueRef::Null,
            Self::Integer(n) => ValueRef::Integer(*n),
            Self::Real(x) => ValueRef::Real(*x),
            Self::Text(text) => ValueRef::Text(text),
            Self::Blob(bytes) => ValueRef::Blob(bytes),
        }
    }
}

/// A floor value bound to the type PostgreSQL inferred for its parameter.
#[derive(Debug)]
struct Bind<'a>(ValueRef<'a>);

fn mismatch(value: ValueRef<'_>, ty: &Type) -> Box<dyn std::error::Error + Sync + Send> {
    format!("cannot bind {value:?} to a parameter of type {ty}").into()
}

impl ToSql for Bind<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let value = self.0;
        if value == ValueRef::Null {
            return Ok(IsNull::Yes);
        }
        match (value, ty) {
            (ValueRef::Integer(n), &Type::INT8) => n.to_sql(ty, out),
            (ValueRef::Integer(n), &Type::INT4) => i32::try_from(n)?.to_sql(ty, out),
            (ValueRef::Integer(n), &Type::INT2) => i16::try_from(n)?.to_sql(ty, out),
            (ValueRef::Integer(n), &Type::BOOL) => (n != 0).to_sql(ty, out),
            #[allow(clippy::cast_precision_loss)]
            (ValueRef::Integer(n), &Type::FLOAT8) => (n as f64).to_sql(ty, out),
            (ValueRef::Integer(n), &Type::NUMERIC) => {
                encode_numeric(n, out);
                Ok(IsNull::No)
            }
            (ValueRef::Real(x), &Type::FLOAT8) => x.to_sql(ty, out),
            #[allow(clippy::cast_possible_truncation)]
            (ValueRef::Real(x), &Type::FLOAT4) => (x as f32).to_sql(ty, out),
            (ValueRef::Integer(n), t) if is_text(t) => n.to_string().as_str().to_sql(ty, out),
            (ValueRef::Real(x), t) if is_text(t) => x.to_string().as_str().to_sql(ty, out),
            (ValueRef::Text(text), t) if is_text(t) => text.to_sql(ty, out),
            (ValueRef::Text(text), &Type::JSON) => {
                out.extend_from_slice(text.as_bytes());
                Ok(IsNull::No)
            }
            (ValueRef::Text(text), &Type::JSONB) => {
                out.extend_from_slice(&[1]);
                out.extend_from_slice(text.as_bytes());
                Ok(IsNull::No)
            }
            (ValueRef::Blob(bytes), &Type::BYTEA) => bytes.to_sql(ty, out),
            (ValueRef::Text(text), &Type::BYTEA) => text.as_bytes().to_sql(ty, out),
            (value, ty) => Err(mismatch(value, ty)),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn is_text(ty: &Type) -> bool {
    matches!(
        *ty,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN
    ) || matches!(ty.kind(), Kind::Domain(inner) if *inner == Type::TEXT)
}

/// An integer in PostgreSQL's binary NUMERIC format (base-10000 digits).
fn encode_numeric(n: i64, out: &mut BytesMut) {
    let mut digits = Vec::new();
    let mut rest = n.unsigned_abs();
    while rest > 0 {
        digits.push(u16::try_from(rest % 10_000).unwrap_or(0));
        rest /= 10_000;
    }
    digits.reverse();
    let count = u16::try_from(digits.len()).unwrap_or(0);
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&(count.saturating_sub(1)).to_be_bytes()); // weight
    out.extend_from_slice(&(if n < 0 { 0x4000u16 } else { 0 }).to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes()); // display scale
    for digit in digits {
        out.extend_from_slice(&digit.to_be_bytes());
    }
}

/// A column's value read as the floor's, from any type the schema or an expression gives.
#[derive(Debug)]
pub(crate) struct Column<'a>(pub(crate) ValueRef<'a>);

impl<'a> postgres::types::FromSql<'a> for Column<'a> {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let value = match *ty {
            Type::BOOL => ValueRef::Integer(i64::from(bool::from_sql(ty, raw)?)),
            Type::INT2 => ValueRef::Integer(i64::from(i16::from_sql(ty, raw)?)),
            Type::INT4 => ValueRef::Integer(i64::from(i32::from_sql(ty, raw)?)),
            Type::INT8 => ValueRef::Integer(i64::from_sql(ty, raw)?),
            Type::OID => ValueRef::Integer(i64::from(u32::from_sql(ty, raw)?)),
            Type::FLOAT4 => ValueRef::Real(f64::from(f32::from_sql(ty, raw)?)),
            Type::FLOAT8 => ValueRef::Real(f64::from_sql(ty, raw)?),
            Type::NUMERIC => decode_numeric(raw)?,
            Type::BYTEA => ValueRef::Blob(raw),
            Type::JSON => ValueRef::Text(std::str::from_utf8(raw)?),
            Type::JSONB => ValueRef::Text(std::str::from_utf8(raw.get(1..).unwrap_or_default())?),
            ref t if is_text(t) => ValueRef::Text(std::str::from_utf8(raw)?),
            ref other => return Err(format!("a column of type {other} is not read by weft").into()),
        };
        Ok(Self(value))
    }

    fn from_sql_null(
        _: &Type,
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Self(ValueRef::Null))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// A NUMERIC (what `SUM` of integers answers) as an integer when it is one, else a float.
fn decode_numeric(
    raw: &[u8],
) -> std::result::Result<ValueRef<'static>, Box<dyn std::error::Error + Sync + Send>> {
    let word = |at: usize| -> std::result::Result<i64, Box<dyn std::error::Error + Sync + Send>> {
        let bytes = raw.get(at..at + 2).ok_or("a short NUMERIC")?;
        Ok(i64::from(i16::from_be_bytes([bytes[0], bytes[1]])))
    };
    let count = word(0)?;
    let weight = word(2)?;
    let sign = word(4)? as u16 as i64;
    if sign == 0xC000 {
        return Ok(ValueRef::Real(f64::NAN));
    }
    let mut integer: i128 = 0;
    let mut fraction = 0f64;
    for index in 0..count {
        let digit = word(8 + 2 * usize::try_from(index)?)?;
        let power = weight - index;
        if power >= 0 {
            integer = integer
                .checked_mul(10_000)
                .and_then(|n| n.checked_add(i128::from(digit)))
                .ok_or("a NUMERIC too large")?;
        } else {
            #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
            {
                fraction += digit as f64 * 10_000f64.powi(power as i32);
            }
        }
    }
    // Trailing zero groups of the integer part are not stored.
    let stored_integer_groups = count.min(weight + 1).max(0);
    for _ in stored_integer_groups..weight + 1 {
        integer = integer.checked_mul(10_000).ok_or("a NUMERIC too large")?;
    }
    let negative = sign == 0x4000;
    if fraction == 0.0 {
        let value = i64::try_from(integer)?;
        Ok(ValueRef::Integer(if negative { -value } else { value }))
    } else {
        #[allow(clippy::cast_precision_loss)]
        let value = integer as f64 + fraction;
        Ok(ValueRef::Real(if negative { -value } else { value }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numerics_decode() {
        // 12345678 = digits [1234, 5678], weight 1.
        let raw = [0, 2, 0, 1, 0, 0, 0, 0, 0x04, 0xD2, 0x16, 0x2E];
        assert_eq!(
            decode_numeric(&raw).ok(),
            Some(ValueRef::Integer(12_345_678))
        );
        // 20000 = digits [2], weight 1 (the trailing zero group is not stored).
        let raw = [0, 1, 0, 1, 0, 0, 0, 0, 0, 2];
        assert_eq!(decode_numeric(&raw).ok(), Some(ValueRef::Integer(20_000)));
        let mut out = BytesMut::new();
        encode_numeric(-20_000, &mut out);
        assert_eq!(decode_numeric(&out).ok(), Some(ValueRef::Integer(-20_000)));
        let raw = [0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(decode_numeric(&raw).ok(), Some(ValueRef::Integer(0)));
    }
}
