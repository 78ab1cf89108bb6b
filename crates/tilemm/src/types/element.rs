//! Element types on the host: one trait for the four types a product may hold, and buffers
//! that carry their type at run time.

use half::{bf16, f16};

use super::DType;

/// A type A, B or C may hold on the host: f16, bf16, f32 or f64.
pub trait Element:
    Copy + Send + Sync + PartialEq + std::fmt::Debug + bytemuck::Pod + 'static
{
    /// Its [`DType`].
    const DTYPE: DType;
    /// The value, exactly, as f64.
    fn to_f64(self) -> f64;
    /// `x` rounded to this type.
    fn from_f64(x: f64) -> Self;
    /// The buffer variant holding elements of this type.
    fn wrap(data: Vec<Self>) -> HostData;
    /// The slice, if `data` holds this type.
    fn slice(data: &HostData) -> Option<&[Self]>;
    /// `data`, lent with its type known at run time.
    fn lend(data: &[Self]) -> HostSlice<'_>;
    /// The slice, if `data` holds this type.
    fn lent<'a>(data: HostSlice<'a>) -> Option<&'a [Self]>;
}

macro_rules! element {
    ($t:ty, $dtype:ident, $to:expr, $from:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$dtype;
            fn to_f64(self) -> f64 {
                $to(self)
            }
            fn from_f64(x: f64) -> Self {
                $from(x)
            }
            fn wrap(data: Vec<Self>) -> HostData {
                HostData::$dtype(data)
            }
            fn slice(data: &HostData) -> Option<&[Self]> {
                match data {
                    HostData::$dtype(v) => Some(v),
                    _ => None,
                }
            }
            fn lend(data: &[Self]) -> HostSlice<'_> {
                HostSlice::$dtype(data)
            }
            fn lent<'a>(data: HostSlice<'a>) -> Option<&'a [Self]> {
                match data {
                    HostSlice::$dtype(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}

element!(f16, F16, f64::from, f16::from_f64);
element!(bf16, BF16, f64::from, bf16::from_f64);
element!(f32, F32, f64::from, |x| x as f32);
element!(f64, F64, |x| x, |x| x);

/// A host buffer of any element type.
#[derive(Clone, Debug, PartialEq)]
pub enum HostData {
    /// binary16.
    F16(Vec<f16>),
    /// bfloat16.
    BF16(Vec<bf16>),
    /// binary32.
    F32(Vec<f32>),
    /// binary64.
    F64(Vec<f64>),
}

/// Runs `$body` with `$v` bound to the typed vector inside a [`HostData`] (or a reference to
/// it), and `$t` to its element type.
#[macro_export]
#[doc(hidden)]
macro_rules! with_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::types::element::HostData::F16($v) => $body,
            $crate::types::element::HostData::BF16($v) => $body,
            $crate::types::element::HostData::F32($v) => $body,
            $crate::types::element::HostData::F64($v) => $body,
        }
    };
}

/// [`with_data!`] for a [`HostSlice`].
#[macro_export]
#[doc(hidden)]
macro_rules! with_slice {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::types::element::HostSlice::F16($v) => $body,
            $crate::types::element::HostSlice::BF16($v) => $body,
            $crate::types::element::HostSlice::F32($v) => $body,
            $crate::types::element::HostSlice::F64($v) => $body,
        }
    };
}

impl HostData {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            HostData::F16(_) => DType::F16,
            HostData::BF16(_) => DType::BF16,
            HostData::F32(_) => DType::F32,
            HostData::F64(_) => DType::F64,
        }
    }

    /// Elements.
    pub fn len(&self) -> usize {
        with_data!(self, v => v.len())
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as f64.
    pub fn get(&self, i: usize) -> f64 {
        with_data!(self, v => v[i].to_f64())
    }

    /// The raw bytes, native byte order.
    pub fn as_bytes(&self) -> &[u8] {
        with_data!(self, v => bytemuck::cast_slice(v))
    }

    /// The typed slice, if the buffer holds `T`.
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        T::slice(self)
    }

    /// `values` rounded to `dtype`'s storage (tf32 data are f32 values).
    pub fn from_f64(dtype: DType, values: impl Iterator<Item = f64>) -> HostData {
        fn collect<T: Element>(values: impl Iterator<Item = f64>) -> HostData {
            T::wrap(values.map(T::from_f64).collect())
        }
        match dtype {
            DType::F16 => collect::<f16>(values),
            DType::BF16 => collect::<bf16>(values),
            DType::F32 | DType::TF32 => collect::<f32>(values),
            DType::F64 => collect::<f64>(values),
        }
    }
}

/// Host elements of any type, borrowed: the caller's own memory (the front door's operands,
/// read where they lie) or a [`HostData`]'s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HostSlice<'a> {
    /// binary16.
    F16(&'a [f16]),
    /// bfloat16.
    BF16(&'a [bf16]),
    /// binary32.
    F32(&'a [f32]),
    /// binary64.
    F64(&'a [f64]),
}

impl<'a> HostSlice<'a> {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            HostSlice::F16(_) => DType::F16,
            HostSlice::BF16(_) => DType::BF16,
            HostSlice::F32(_) => DType::F32,
            HostSlice::F64(_) => DType::F64,
        }
    }

    /// Elements.
    pub fn len(&self) -> usize {
        with_slice!(self, v => v.len())
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as f64.
    pub fn get(&self, i: usize) -> f64 {
        with_slice!(self, v => v[i].to_f64())
    }

    /// The raw bytes, native byte order.
    pub fn as_bytes(&self) -> &'a [u8] {
        match *self {
            HostSlice::F16(v) => bytemuck::cast_slice(v),
            HostSlice::BF16(v) => bytemuck::cast_slice(v),
            HostSlice::F32(v) => bytemuck::cast_slice(v),
            HostSlice::F64(v) => bytemuck::cast_slice(v),
        }
    }

    /// The typed slice, if it holds `T`.
    pub fn as_slice<T: Element>(&self) -> Option<&'a [T]> {
        T::lent(*self)
    }

    /// An owned copy.
    pub fn to_owned(&self) -> HostData {
        with_slice!(*self, v => HostData::from(v.to_vec()))
    }
}

impl HostData {
    /// The elements, borrowed.
    pub fn lend(&self) -> HostSlice<'_> {
        with_data!(self, v => Element::lend(v.as_slice()))
    }
}

impl<'a> From<&'a HostData> for HostSlice<'a> {
    fn from(data: &'a HostData) -> Self {
        data.lend()
    }
}

impl<T: Element> From<Vec<T>> for HostData {
    fn from(v: Vec<T>) -> Self {
        T::wrap(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_type_rounds_and_widens_exactly() {
        let x = 1.0 + 2f64.powi(-9);
        assert_eq!(f16::from_f64(x).to_f64(), x);
        assert_eq!(bf16::from_f64(x).to_f64(), 1.0);
        let data = HostData::from_f64(DType::BF16, [x, 3.0].into_iter());
        assert_eq!(data.dtype(), DType::BF16);
        assert_eq!((data.get(0), data.get(1)), (1.0, 3.0));
        assert_eq!(data.as_bytes().len(), 4);
        assert!(data.as_slice::<f32>().is_none());
    }
}
