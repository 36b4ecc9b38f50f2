//! The values that cross the floor, the same on every index engine: what a statement binds
//! ([`ToValue`], [`Params`], the [`params!`](crate::sql::params) macro) and what a row answers
//! (`Row::get` into any [`FromValue`]). Five kinds, as SQLite stores them: NULL, a 64-bit
//! integer, a float, UTF-8 text, bytes. An engine converts them to and from its own types at
//! the edge (`connection.rs` for SQLite and the rows of both, `postgres.rs` for PostgreSQL's
//! types), so a `rows/` file writes one statement and one row reader for both.
//!
//! Unsigned integers above `i64::MAX` are refused when bound and negative ones when read, as
//! rusqlite's `fallible_uint` does: an index never stores what it could not give back.

use smallvec::SmallVec;

/// One value as a statement binds it or a row holds it (borrowed from either).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ValueRef<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

/// What went wrong at the floor: no row where one was required, a value of the wrong kind,
/// or the engine's own error (kept whole, so a full disk is still told as one).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SqlError {
    #[error("the query returned no rows")]
    NoRows,
    #[error("column {column}: {why}")]
    Conversion { column: usize, why: String },
    #[error("bound value: {0}")]
    Bind(String),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    Postgres(#[from] postgres::Error),
    /// A read sent ahead whose answer never came (`ahead.rs`).
    #[error("a read sent ahead was not answered")]
    Unanswered,
    /// The runtime a PostgreSQL connection is driven by could not be built.
    #[error("cannot start a PostgreSQL connection's runtime")]
    Runtime(#[source] std::io::Error),
    /// PostgreSQL refused a statement as written (a translation `postgres.rs` lacks).
    #[error("PostgreSQL cannot prepare {sql:?}")]
    Prepare {
        sql: String,
        #[source]
        source: postgres::Error,
    },
}

pub(crate) type Result<T, E = SqlError> = std::result::Result<T, E>;

impl SqlError {
    /// PostgreSQL's refusal of a statement in a transaction an earlier one aborted (25P02):
    /// the earlier failure is the cause.
    pub(crate) fn is_after_abort(&self) -> bool {
        matches!(self, Self::Postgres(error)
            if error.code() == Some(&postgres::error::SqlState::IN_FAILED_SQL_TRANSACTION))
    }
}

/// `Ok(None)` for [`SqlError::NoRows`] (rusqlite's `OptionalExtension`, for both engines).
pub(crate) trait OptionalExtension<T> {
    fn optional(self) -> Result<Option<T>>;
}

impl<T> OptionalExtension<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(value) => Ok(Some(value)),
            Err(SqlError::NoRows) => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// A Rust value a statement can bind.
pub(crate) trait ToValue {
    fn to_value(&self) -> Result<ValueRef<'_>>;
}

macro_rules! signed {
    ($($t:ty),*) => {$(
        impl ToValue for $t {
            fn to_value(&self) -> Result<ValueRef<'_>> {
                Ok(ValueRef::Integer(i64::from(*self)))
            }
        }
    )*};
}
signed!(i8, i16, i32, i64, u8, u16, u32, bool);

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl ToValue for $t {
            fn to_value(&self) -> Result<ValueRef<'_>> {
                i64::try_from(*self)
                    .map(ValueRef::Integer)
                    .map_err(|_| SqlError::Bind(format!("{} does not fit a 64-bit integer", self)))
            }
        }
    )*};
}
unsigned!(u64, usize, isize);

impl ToValue for f64 {
    fn to_value(&self) -> Result<ValueRef<'_>> {
        Ok(ValueRef::Real(*self))
    }
}

impl ToValue for str {
    fn to_value(&self) -> Result<ValueRef<'_>> {
        Ok(ValueRef::Text(self))
    }
}

impl ToValue for String {
    fn to_value(&self) -> Result<ValueRef<'_>> {
        Ok(ValueRef::Text(self))
    }
}

impl ToValue for [u8] {
    fn to_value(&self) -> Result<ValueRef<'_>> {
        Ok(ValueRef::Blob(self))
    }
}

impl ToValue for Vec<u8> {
    fn to_value(&self) -> Result<ValueRef<'_>> {
        Ok(ValueRef::Blob(self))
    }
}

impl<const N: usize> ToValue for [u8; N] {
    fn to_value(&self) -> Result<ValueRef<'_>> {
        Ok(ValueRef::Blob(self))
    }
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Result<ValueRef<'_>> {
        (**self).to_value()
    }
}

impl<T: ToValue + ?Sized> ToValue for Box<T> {
    fn to_value(&self) -> Result<ValueRef<'_>> {
        (**self).to_value()
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Result<ValueRef<'_>> {
        match self {
            Some(value) => value.to_value(),
            None => Ok(ValueRef::Null),
        }
    }
}

impl ToValue for ValueRef<'_> {
    fn to_value(&self) -> Result<ValueRef<'_>> {
        Ok(*self)
    }
}

/// The values bound to one statement, in order.
pub(crate) type Bound<'a> = SmallVec<[ValueRef<'a>; 8]>;

/// What a statement takes as its parameters: `[]`, an array of one type, `params![…]` (a
/// slice of `&dyn ToValue`).
pub(crate) trait Params {
    fn bind(&self) -> Result<Bound<'_>>;
}

impl Params for [&dyn ToValue; 0] {
    fn bind(&self) -> Result<Bound<'_>> {
        Ok(Bound::new())
    }
}

impl Params for &[&dyn ToValue] {
    fn bind(&self) -> Result<Bound<'_>> {
        self.iter().map(|value| value.to_value()).collect()
    }
}

impl<T: ToValue, const N: usize> Params for &[T; N] {
    fn bind(&self) -> Result<Bound<'_>> {
        self.iter().map(ToValue::to_value).collect()
    }
}

macro_rules! arrays {
    ($($n:literal),*) => {$(
        impl<T: ToValue> Params for [T; $n] {
            fn bind(&self) -> Result<Bound<'_>> {
                self.iter().map(ToValue::to_value).collect()
            }
        }
    )*};
}
arrays!(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);

/// A Rust value a row's column can be read into.
pub(crate) trait FromValue: Sized {
    fn from_value(value: ValueRef<'_>) -> std::result::Result<Self, String>;
}

pub(super) fn kind(value: ValueRef<'_>) -> &'static str {
    match value {
        ValueRef::Null => "NULL",
        ValueRef::Integer(_) => "an integer",
        ValueRef::Real(_) => "a float",
        ValueRef::Text(_) => "text",
        ValueRef::Blob(_) => "bytes",
    }
}

fn wrong<T>(value: ValueRef<'_>, wanted: &str) -> std::result::Result<T, String> {
    Err(format!("expected {wanted}, found {}", kind(value)))
}

impl FromValue for i64 {
    fn from_value(value: ValueRef<'_>) -> std::result::Result<Self, String> {
        match value {
            ValueRef::Integer(n) => Ok(n),
            other => wrong(other, "an integer"),
        }
    }
}

macro_rules! narrowed {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(value: ValueRef<'_>) -> std::result::Result<Self, String> {
                let n = i64::from_value(value)?;
                <$t>::try_from(n).map_err(|_| format!("{n} is out of range for {}", stringify!($t)))
            }
        }
    )*};
}
narrowed!(i32, u8, u16, u32, u64, usize);

impl FromValue for bool {
    fn from_value(value: ValueRef<'_>) -> std::result::Result<Self, String> {
        Ok(i64::from_value(value)? != 0)
    }
}

impl FromValue for f64 {
    fn from_value(value: ValueRef<'_>) -> std::result::Result<Self, String> {
        match value {
            ValueRef::Real(x) => Ok(x),
            // As SQLite converts: an integer column read as a float.
            #[allow(clippy::cast_precision_loss)]
            ValueRef::Integer(n) => Ok(n as f64),
            other => wrong(other, "a float"),
        }
    }
}

impl FromValue for String {
    fn from_value(value: ValueRef<'_>) -> std::result::Result<Self, String> {
        match value {
            ValueRef::Text(text) => Ok(text.to_owned()),
            other => wrong(other, "text"),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(value: ValueRef<'_>) -> std::result::Result<Self, String> {
        match value {
            ValueRef::Blob(bytes) => Ok(bytes.to_vec()),
            other => wrong(other, "bytes"),
        }
    }
}

impl<const N: usize> FromValue for [u8; N] {
    fn from_value(value: ValueRef<'_>) -> std::result::Result<Self, String> {
        match value {
            ValueRef::Blob(bytes) => bytes
                .try_into()
                .map_err(|_| format!("expected {N} bytes, found {}", bytes.len())),
            other => wrong(other, "bytes"),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: ValueRef<'_>) -> std::result::Result<Self, String> {
        match value {
            ValueRef::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}
