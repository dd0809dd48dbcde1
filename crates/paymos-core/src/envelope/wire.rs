//! The body read in one pass for what the envelope's checks look at: the top level's
//! `event_id`, `type`, `created`, `livemode` and `data`, and `data`'s `id`, `order_ref`,
//! `amount` and `currency`, each kept as its JSON type says; every other value is skipped
//! (still parsed, so the body must be JSON all through). A `serde_json::Value` tree of the
//! whole body built a map and a string for every field, to read nine of them (bench/README.md,
//! "The envelope in one pass").
//!
//! As in a `serde_json::Map`, of two fields with one name the last counts: a body the receiver
//! accepted reads the same in the consumer whichever parser stored it.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt;

/// A field's value as the checks see it.
#[derive(Debug)]
pub(super) enum Field<'a> {
    Null,
    Bool(bool),
    /// An integer within `i64` (what `Value::as_i64` reads).
    Int(i64),
    /// Borrowed from the body unless it had escapes.
    Str(Cow<'a, str>),
    /// An object, with the fields of `data` that are read.
    Object(Box<Data<'a>>),
    /// Any other number, or an array.
    Other,
}

impl Field<'_> {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Field::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an owned string where it is one.
    pub fn into_string(self) -> Option<String> {
        match self {
            Field::Str(s) => Some(s.into_owned()),
            _ => None,
        }
    }
}

/// The body's top level; `None` where a field is absent.
#[derive(Debug, Default)]
pub(super) struct Top<'a> {
    pub event_id: Option<Field<'a>>,
    pub event_type: Option<Field<'a>>,
    pub created: Option<Field<'a>>,
    pub livemode: Option<Field<'a>>,
    pub data: Option<Field<'a>>,
}

/// An object's fields that `data` is read for.
#[derive(Debug, Default)]
pub(super) struct Data<'a> {
    pub id: Option<Field<'a>>,
    pub order_ref: Option<Field<'a>>,
    pub amount: Option<Field<'a>>,
    pub currency: Option<Field<'a>>,
}

const TOP: &[&str] = &["event_id", "type", "created", "livemode", "data"];
const DATA: &[&str] = &["id", "order_ref", "amount", "currency"];

/// A map's fields, each read into its slot by name (`names[i]` into `slots[i]`, the last of
/// several with one name counting), every other value skipped.
fn fields<'de, A: MapAccess<'de>>(
    mut map: A,
    names: &'static [&'static str],
    slots: &mut [&mut Option<Field<'de>>],
) -> Result<(), A::Error> {
    while let Some(key) = map.next_key_seed(Name(names))? {
        match key {
            Some(i) => *slots[i] = Some(map.next_value()?),
            None => {
                map.next_value::<IgnoredAny>()?;
            }
        }
    }
    Ok(())
}

impl<'de> Deserialize<'de> for Top<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TopVisitor;
        impl<'de> Visitor<'de> for TopVisitor {
            type Value = Top<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Top<'de>, A::Error> {
                let mut t = Top::default();
                let slots = &mut [
                    &mut t.event_id,
                    &mut t.event_type,
                    &mut t.created,
                    &mut t.livemode,
                    &mut t.data,
                ];
                fields(map, TOP, slots)?;
                Ok(t)
            }
        }
        d.deserialize_map(TopVisitor)
    }
}

/// A key, as its index in the names looked for (`None`: another name).
struct Name(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Name {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Name {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E>(self, s: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|n| *n == s))
    }
}

impl<'de> Deserialize<'de> for Field<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldVisitor)
    }
}

struct FieldVisitor;

impl<'de> Visitor<'de> for FieldVisitor {
    type Value = Field<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Field<'de>, E> {
        Ok(Field::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Field<'de>, E> {
        Ok(Field::Bool(b))
    }
    fn visit_i64<E>(self, i: i64) -> Result<Field<'de>, E> {
        Ok(Field::Int(i))
    }
    fn visit_u64<E>(self, u: u64) -> Result<Field<'de>, E> {
        Ok(i64::try_from(u).map_or(Field::Other, Field::Int))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Field<'de>, E> {
        Ok(Field::Other)
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Field<'de>, E> {
        Ok(Field::Str(Cow::Borrowed(s)))
    }
    fn visit_str<E>(self, s: &str) -> Result<Field<'de>, E> {
        Ok(Field::Str(Cow::Owned(s.to_owned())))
    }
    fn visit_string<E>(self, s: String) -> Result<Field<'de>, E> {
        Ok(Field::Str(Cow::Owned(s)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Field<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Field::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Field<'de>, A::Error> {
        let mut d = Data::default();
        let slots = &mut [&mut d.id, &mut d.order_ref, &mut d.amount, &mut d.currency];
        fields(map, DATA, slots)?;
        Ok(Field::Object(Box::new(d)))
    }
}
