//! Deserialization building blocks shared by the raw structs: integers that follow the official
//! parser's rules, order-preserving maps, strict optional fields and the [`Merge`] trait that
//! applies a config overlay the way ONNX Runtime GenAI does.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Folds an overlay value into an existing one, following the official parser, which parses the
/// overlay onto the already filled structures: scalars are replaced, objects merge key by key,
/// arrays append.
pub trait Merge {
    /// Applies `other` (the overlay) on top of `self`.
    fn merge(&mut self, other: Self);
}

impl<T: Merge> Merge for Option<T> {
    fn merge(&mut self, other: Self) {
        match (self.as_mut(), other) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (None, Some(theirs)) => *self = Some(theirs),
            (_, None) => {}
        }
    }
}

macro_rules! replace_merge {
    ($($t:ty),*) => {$(
        impl Merge for $t {
            fn merge(&mut self, other: Self) {
                *self = other;
            }
        }
    )*};
}
replace_merge!(String, bool, f64, Int, Int64);

/// Arrays append, as in the official parser (an overlay's `eos_token_id: [..]` adds ids).
impl<T> Merge for Vec<T> {
    fn merge(&mut self, other: Self) {
        self.extend(other);
    }
}

/// Deserializes an optional field whose value, when the key is present, must not be `null`
/// (the official parser rejects `null` everywhere). Use with `#[serde(default)]`.
pub(crate) fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// Declares a raw struct shaped like one JSON object of `genai_config.json`: every field is an
/// `Option` (absent keys stay `None`), unknown keys are rejected, `null` is rejected, and the
/// struct gets a field-by-field [`Merge`].
macro_rules! raw_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $(
                $(#[$fmeta])*
                #[serde(default, deserialize_with = "crate::de::present")]
                pub $field: Option<$ty>,
            )*
        }

        impl crate::de::Merge for $name {
            fn merge(&mut self, other: Self) {
                let $name { $($field),* } = other;
                $( crate::de::Merge::merge(&mut self.$field, $field); )*
            }
        }
    };
}
pub(crate) use raw_struct;

macro_rules! json_int {
    ($(#[$meta:meta])* $name:ident, $inner:ty, $label:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub $inner);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str("an integer")
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$name, E> {
                        <$inner>::try_from(v).map($name).map_err(|_| {
                            E::custom(format!("value {v} is out of {} range", $label))
                        })
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$name, E> {
                        <$inner>::try_from(v).map($name).map_err(|_| {
                            E::custom(format!("value {v} is out of {} range", $label))
                        })
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$name, E> {
                        if !v.is_finite() {
                            return Err(E::custom(format!("value {v} is not a finite number")));
                        }
                        if v.trunc() != v {
                            return Err(E::custom(format!("value {v} is not an integer")));
                        }
                        // In-range integral doubles convert exactly; the bounds are powers of two.
                        let min = <$inner>::MIN as f64;
                        let max_exclusive = -(<$inner>::MIN as f64);
                        if v < min || v >= max_exclusive {
                            return Err(E::custom(format!("value {v} is out of {} range", $label)));
                        }
                        Ok($name(v as $inner))
                    }
                }
                deserializer.deserialize_any(V)
            }
        }
    };
}

json_int!(
    /// A JSON number that must be a whole int32, the way the official `SafeDoubleToInt` reads it:
    /// `12` and `12.0` are accepted, `12.5` and `3e9` are errors.
    Int,
    i32,
    "int32"
);
json_int!(
    /// A JSON number that must be a whole int64 (used by shared initializer shapes).
    Int64,
    i64,
    "int64"
);

/// An ordered string-to-string map (session config entries, run options, provider options).
/// Merging replaces the value of a key already present and appends new keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StringMap(pub Vec<(String, String)>);

impl StringMap {
    /// Sets `key` to `value`, replacing an existing entry in place or appending a new one.
    pub fn set(&mut self, key: String, value: String) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// The value stored for `key`, if any.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

impl Merge for StringMap {
    fn merge(&mut self, other: Self) {
        for (k, v) in other.0 {
            self.set(k, v);
        }
    }
}

impl<'de> Deserialize<'de> for StringMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let list = NamedList::<String>::deserialize(deserializer)?;
        let mut map = StringMap::default();
        for (k, v) in list.0 {
            map.set(k, v);
        }
        Ok(map)
    }
}

/// An ordered list of named objects, written in JSON as one object (`{"a": {..}, "b": {..}}`).
/// Merging appends, like the official parser does for pipeline stages.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedList<T>(pub Vec<(String, T)>);

impl<T> Default for NamedList<T> {
    fn default() -> Self {
        NamedList(Vec::new())
    }
}

impl<T> Merge for NamedList<T> {
    fn merge(&mut self, other: Self) {
        self.0.extend(other.0);
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for NamedList<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = NamedList<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value = map.next_value::<T>()?;
                    out.push((key, value));
                }
                Ok(NamedList(out))
            }
        }
        deserializer.deserialize_map(V(PhantomData))
    }
}

/// A list of named objects that the official parser accepts in two shapes: an object of named
/// entries, or an array of such objects (`[{"a": {..}}, {"b": {..}}]`). Order is kept.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedEntries<T>(pub Vec<(String, T)>);

impl<T> Default for NamedEntries<T> {
    fn default() -> Self {
        NamedEntries(Vec::new())
    }
}

impl<T> Merge for NamedEntries<T> {
    fn merge(&mut self, other: Self) {
        self.0.extend(other.0);
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for NamedEntries<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = NamedEntries<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of named entries or an array of such objects")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let list = NamedList::<T>::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(NamedEntries(list.0))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(group) = seq.next_element::<NamedList<T>>()? {
                    out.extend(group.0);
                }
                Ok(NamedEntries(out))
            }
        }
        deserializer.deserialize_any(V(PhantomData))
    }
}

/// A section this crate records but does not model field by field (features newer than the
/// published 0.18 source, such as `model.dflash2`). Any JSON value is accepted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Opaque;

impl Merge for Opaque {
    fn merge(&mut self, _other: Self) {}
}

impl<'de> Deserialize<'de> for Opaque {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(deserializer).map(|_| Opaque)
    }
}

/// `eos_token_id`: one id or a list of ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EosTokenId {
    /// `"eos_token_id": 2`
    One(Int),
    /// `"eos_token_id": [2, 32000]`
    Many(Vec<Int>),
}

impl EosTokenId {
    /// The ids in file order.
    pub fn ids(&self) -> Vec<i32> {
        match self {
            EosTokenId::One(id) => vec![id.0],
            EosTokenId::Many(ids) => ids.iter().map(|id| id.0).collect(),
        }
    }
}

impl Merge for EosTokenId {
    /// A single id replaces the list; a list is appended (the official overlay behaviour).
    fn merge(&mut self, other: Self) {
        match other {
            EosTokenId::One(id) => *self = EosTokenId::One(id),
            EosTokenId::Many(more) => {
                let mut ids: Vec<Int> = match self {
                    EosTokenId::One(id) => vec![*id],
                    EosTokenId::Many(ids) => std::mem::take(ids),
                };
                ids.extend(more);
                *self = EosTokenId::Many(ids);
            }
        }
    }
}

impl<'de> Deserialize<'de> for EosTokenId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = EosTokenId;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an integer or a list of integers")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<EosTokenId, E> {
                Int::deserialize(de::value::I64Deserializer::new(v)).map(EosTokenId::One)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<EosTokenId, E> {
                Int::deserialize(de::value::U64Deserializer::new(v)).map(EosTokenId::One)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<EosTokenId, E> {
                Int::deserialize(de::value::F64Deserializer::new(v)).map(EosTokenId::One)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<EosTokenId, A::Error> {
                let mut ids = Vec::new();
                while let Some(id) = seq.next_element::<Int>()? {
                    ids.push(id);
                }
                Ok(EosTokenId::Many(ids))
            }
        }
        deserializer.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(json: &str) -> Result<Int, String> {
        serde_json::from_str::<Int>(json).map_err(|e| e.to_string())
    }

    #[test]
    fn int_accepts_whole_numbers_only() {
        assert_eq!(int("12"), Ok(Int(12)));
        assert_eq!(int("-1"), Ok(Int(-1)));
        assert_eq!(int("12.0"), Ok(Int(12)));
        assert!(
            int("12.5")
                .unwrap_err()
                .contains("value 12.5 is not an integer")
        );
        assert!(
            int("3000000000")
                .unwrap_err()
                .contains("out of int32 range")
        );
        assert!(int("\"12\"").unwrap_err().contains("expected an integer"));
        assert!(int("null").unwrap_err().contains("expected an integer"));
    }

    #[test]
    fn string_map_keeps_order_and_replaces() {
        let mut m: StringMap = serde_json::from_str(r#"{"b": "1", "a": "2"}"#).unwrap();
        assert_eq!(
            m.0,
            vec![("b".into(), "1".into()), ("a".into(), "2".into())]
        );
        m.merge(serde_json::from_str(r#"{"a": "3", "c": "4"}"#).unwrap());
        assert_eq!(
            m.0,
            vec![
                ("b".into(), "1".into()),
                ("a".into(), "3".into()),
                ("c".into(), "4".into())
            ]
        );
        assert_eq!(m.get("c"), Some("4"));
    }

    #[test]
    fn eos_merge_follows_official_overlay() {
        let mut e = EosTokenId::One(Int(98));
        e.merge(EosTokenId::Many(vec![Int(5), Int(6)]));
        assert_eq!(e.ids(), vec![98, 5, 6]);
        e.merge(EosTokenId::One(Int(7)));
        assert_eq!(e.ids(), vec![7]);
    }

    #[test]
    fn named_entries_accept_both_shapes() {
        let a: NamedEntries<Int> = serde_json::from_str(r#"[{"x": 1}, {"y": 2, "z": 3}]"#).unwrap();
        let b: NamedEntries<Int> = serde_json::from_str(r#"{"x": 1, "y": 2, "z": 3}"#).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.0[2], ("z".to_string(), Int(3)));
    }
}
