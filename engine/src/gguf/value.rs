//! Metadata values and the fixed-size encodings they are read from.

use std::fmt;

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<Value>),
}

impl Value {
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::U8(_) => "u8",
            Value::I8(_) => "i8",
            Value::U16(_) => "u16",
            Value::I16(_) => "i16",
            Value::U32(_) => "u32",
            Value::I32(_) => "i32",
            Value::U64(_) => "u64",
            Value::I64(_) => "i64",
            Value::F32(_) => "f32",
            Value::F64(_) => "f64",
            Value::Bool(_) => "bool",
            Value::String(_) => "string",
            Value::Array(_) => "array",
        }
    }

    /// Any integer that is not negative.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v as u64),
            Value::U16(v) => Some(v as u64),
            Value::U32(v) => Some(v as u64),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer, when it fits in an i64.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::U64(v) => i64::try_from(v).ok(),
            Value::I8(v) => Some(v as i64),
            Value::I16(v) => Some(v as i64),
            Value::I32(v) => Some(v as i64),
            Value::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// Any float or integer, converted (rounded) to f32.
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(v) => Some(v),
            Value::F64(v) => Some(v as f32),
            Value::U8(v) => Some(v as f32),
            Value::I8(v) => Some(v as f32),
            Value::U16(v) => Some(v as f32),
            Value::I16(v) => Some(v as f32),
            Value::U32(v) => Some(v as f32),
            Value::I32(v) => Some(v as f32),
            Value::U64(v) => Some(v as f32),
            Value::I64(v) => Some(v as f32),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }
}

/// Short human-readable form: strings quoted, long arrays cut after a few items.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::U8(v) => write!(f, "{v}"),
            Value::I8(v) => write!(f, "{v}"),
            Value::U16(v) => write!(f, "{v}"),
            Value::I16(v) => write!(f, "{v}"),
            Value::U32(v) => write!(f, "{v}"),
            Value::I32(v) => write!(f, "{v}"),
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F32(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::String(s) if s.chars().count() > 80 => {
                let cut: String = s.chars().take(80).collect();
                write!(f, "{cut:?}...")
            }
            Value::String(s) => write!(f, "{s:?}"),
            Value::Array(a) => {
                const SHOWN: usize = 8;
                f.write_str("[")?;
                for (i, v) in a.iter().take(SHOWN).enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                if a.len() > SHOWN {
                    write!(f, ", ... ({} items)", a.len())?;
                }
                f.write_str("]")
            }
        }
    }
}

/// Sizes of the metadata value types that have a fixed size.
pub(super) fn fixed_size(ty: u32) -> Option<u64> {
    Some(match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        10..=12 => 8,
        _ => return None,
    })
}

/// Decodes one fixed-size value from exactly `fixed_size(ty)` bytes.
pub(super) fn decode_fixed(ty: u32, b: &[u8]) -> Value {
    fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&b[..N]);
        a
    }
    match ty {
        0 => Value::U8(b[0]),
        1 => Value::I8(b[0] as i8),
        2 => Value::U16(u16::from_le_bytes(arr(b))),
        3 => Value::I16(i16::from_le_bytes(arr(b))),
        4 => Value::U32(u32::from_le_bytes(arr(b))),
        5 => Value::I32(i32::from_le_bytes(arr(b))),
        6 => Value::F32(f32::from_le_bytes(arr(b))),
        7 => Value::Bool(b[0] != 0),
        10 => Value::U64(u64::from_le_bytes(arr(b))),
        11 => Value::I64(i64::from_le_bytes(arr(b))),
        _ => Value::F64(f64::from_le_bytes(arr(b))), // 12; callers pass only fixed-size types
    }
}
