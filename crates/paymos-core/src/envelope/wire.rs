//! The body read in one pass for what the envelope's checks look at: the top level's
//! `event_id`, `type`, `created`, `livemode` and `data`, and `data`'s `id`, `order_ref`,
//! `amount` and `currency`, each kept as its JSON type says; every other value is skipped
//! (still parsed, so the body must be JSON all through). A `serde_json::Value` tree of the
//! whole body built a map and a string for every field, to read nine of them (bench/README.md,
//! "The envelope in one pass").
//!
//! As in a `serde_json::Map`, of two fields with one name the last counts: a body the receiver
//! accepted reads the same in the consumer whichever parser stored it.
//!
//! Two readers, one answer: [`scan`], a byte scanner for the bodies a provider sends (no
//! escapes in the fields read, integers or plain decimals, shallow nesting), and serde_json
//! through the `Deserialize` impls below for everything else. The scanner never refuses: where
//! it is not sure of serde_json's answer (an escape in a key, an exponent, a byte serde_json
//! would refuse) it gives up and serde_json decides, so both readers accept the same bodies
//! and read them the same (property-tested against serde_json alone). It spares a fresh
//! isolate's first delivery the compile of serde_json's deserializer, and every delivery its
//! two parses' generic code (bench/README.md, "JSON text by bytes; the envelope scanned").

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt;

/// A field's value as the checks see it.
#[derive(Debug, PartialEq)]
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
#[derive(Debug, Default, PartialEq)]
pub(super) struct Top<'a> {
    pub event_id: Option<Field<'a>>,
    pub event_type: Option<Field<'a>>,
    pub created: Option<Field<'a>>,
    pub livemode: Option<Field<'a>>,
    pub data: Option<Field<'a>>,
}

/// An object's fields that `data` is read for.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Data<'a> {
    pub id: Option<Field<'a>>,
    pub order_ref: Option<Field<'a>>,
    pub amount: Option<Field<'a>>,
    pub currency: Option<Field<'a>>,
}

impl<'a> Top<'a> {
    /// The fields in `TOP`'s order.
    fn slots(&mut self) -> [&mut Option<Field<'a>>; 5] {
        [
            &mut self.event_id,
            &mut self.event_type,
            &mut self.created,
            &mut self.livemode,
            &mut self.data,
        ]
    }
}

impl<'a> Data<'a> {
    /// The fields in `DATA`'s order.
    fn slots(&mut self) -> [&mut Option<Field<'a>>; 4] {
        [
            &mut self.id,
            &mut self.order_ref,
            &mut self.amount,
            &mut self.currency,
        ]
    }
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
                fields(map, TOP, &mut t.slots())?;
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
        fields(map, DATA, &mut d.slots())?;
        Ok(Field::Object(Box::new(d)))
    }
}

/// The body as serde_json reads it into [`Top`], or `None` where the scanner leaves the
/// answer to serde_json (which may accept the body or refuse it).
pub(super) fn scan(body: &[u8]) -> Option<Top<'_>> {
    let mut s = Scanner { b: body, i: 0 };
    s.space();
    s.eat(b'{')?;
    let mut t = Top::default();
    s.fields(TOP, &mut t.slots(), 1)?;
    s.space();
    (s.i == body.len()).then_some(t)
}

/// Where a string's plain run from `i` ends: the first `"`, `\\` or control character, or the
/// end of the body. Eight bytes at a time where none of the eight is one (as serde_json's own
/// `skip_to_escape` does): a byte at a time, a 16 KB body took ten times serde_json's time.
fn plain_run_end(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // a byte of `x` below `n` (n <= 0x80) sets the high bit of its lane in the result
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH;
    while let Some(chunk) = b.get(i..i + 8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let ends = below(w ^ (ONES * u64::from(b'"')), 1)
            | below(w ^ (ONES * u64::from(b'\\')), 1)
            | below(w, 0x20);
        if ends != 0 {
            break;
        }
        i += 8;
    }
    while i < b.len() && !matches!(b[i], b'"' | b'\\' | 0..=0x1f) {
        i += 1;
    }
    i
}

/// Object nesting the scanner reads fields through; deeper, serde_json decides (its own
/// limit is 128).
const DEPTH: usize = 16;

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.i += 1)
    }

    /// JSON's whitespace, as serde_json skips it.
    fn space(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// An object's members after its `{`, each read into its slot by name or skipped.
    fn fields(
        &mut self,
        names: &[&str],
        slots: &mut [&mut Option<Field<'a>>],
        depth: usize,
    ) -> Option<()> {
        self.space();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            self.space();
            self.eat(b'"')?;
            let key = self.plain_str()?;
            self.space();
            self.eat(b':')?;
            self.space();
            match names.iter().position(|n| *n == key) {
                Some(at) => *slots[at] = Some(self.field(depth)?),
                None => self.skip()?,
            }
            self.space();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A value read as a [`Field`].
    fn field(&mut self, depth: usize) -> Option<Field<'a>> {
        Some(match self.peek()? {
            b'"' => {
                self.i += 1;
                Field::Str(Cow::Borrowed(self.plain_str()?))
            }
            b'{' if depth < DEPTH => {
                self.i += 1;
                let mut d = Data::default();
                self.fields(DATA, &mut d.slots(), depth + 1)?;
                Field::Object(Box::new(d))
            }
            b'[' => {
                self.skip()?;
                Field::Other
            }
            b'n' => self.literal(b"null").map(|()| Field::Null)?,
            b't' => self.literal(b"true").map(|()| Field::Bool(true))?,
            b'f' => self.literal(b"false").map(|()| Field::Bool(false))?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return None,
        })
    }

    /// `null`, `true` or `false`.
    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// A string after its `"`, up to its closing `"`, as serde_json reads it where it has no
    /// escape: valid UTF-8, no control character.
    fn plain_str(&mut self) -> Option<&'a str> {
        let start = self.i;
        self.i = plain_run_end(self.b, start);
        self.eat(b'"')?;
        std::str::from_utf8(&self.b[start..self.i - 1]).ok()
    }

    /// A number in a field read, with up to 18 digits before any `.` (within `i64`, and no
    /// decimal out of `f64`'s range): an integer as `Int`, a decimal without exponent as
    /// `Other`; anything else to serde_json (`-0` is a float there, an exponent can be out of
    /// its range).
    fn number(&mut self) -> Option<Field<'a>> {
        let start = self.i;
        self.skip_number()?;
        let text = &self.b[start..self.i];
        let (negative, unsigned) = match text.strip_prefix(b"-") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let digits = unsigned.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits > 18 || unsigned.iter().any(|b| matches!(b, b'e' | b'E')) {
            return None;
        }
        if digits < unsigned.len() {
            // a `.` and its digits
            return Some(Field::Other);
        }
        let n = unsigned
            .iter()
            .fold(0i64, |n, d| n * 10 + i64::from(d - b'0'));
        match (negative, n) {
            (true, 0) => None,
            (true, n) => Some(Field::Int(-n)),
            (false, n) => Some(Field::Int(n)),
        }
    }

    /// `0`, or a digit 1-9 and more digits: one leading zero at most.
    fn integer_digits(&mut self) -> Option<()> {
        match self.peek()? {
            b'0' => {
                self.i += 1;
                (!matches!(self.peek(), Some(b'0'..=b'9'))).then_some(())
            }
            b'1'..=b'9' => self.digits(),
            _ => None,
        }
    }

    /// One digit or more.
    fn digits(&mut self) -> Option<()> {
        let start = self.i;
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        (self.i > start).then_some(())
    }

    /// Any value, checked and skipped as serde_json skips a value it does not read (strings
    /// with their escapes, not decoded; numbers by their grammar alone): an explicit stack of
    /// the arrays and objects it is in.
    fn skip(&mut self) -> Option<()> {
        // the closing byte of each container the value is in, innermost last
        let mut open: Vec<u8> = Vec::new();
        loop {
            // a value
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    self.skip_str()?;
                }
                b'{' | b'[' => {
                    let close = if self.b[self.i] == b'{' { b'}' } else { b']' };
                    self.i += 1;
                    self.space();
                    if self.eat(close).is_none() {
                        open.push(close);
                        if close == b'}' {
                            self.key()?;
                        }
                        self.space();
                        continue;
                    }
                }
                b'n' => self.literal(b"null")?,
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'-' | b'0'..=b'9' => self.skip_number()?,
                _ => return None,
            }
            // what follows it: the next member, or the end of the containers it closes
            loop {
                let Some(&close) = open.last() else {
                    return Some(());
                };
                self.space();
                match self.peek()? {
                    b',' => {
                        self.i += 1;
                        self.space();
                        if close == b'}' {
                            self.key()?;
                            self.space();
                        }
                        break;
                    }
                    b if b == close => {
                        self.i += 1;
                        open.pop();
                    }
                    _ => return None,
                }
            }
        }
    }

    /// An object's key and its `:`, in a value skipped.
    fn key(&mut self) -> Option<()> {
        self.eat(b'"')?;
        self.skip_str()?;
        self.space();
        self.eat(b':')
    }

    /// A string after its `"`, skipped as serde_json's `ignore_str` does: escapes checked (a
    /// `\u` for its four hex digits only), control characters refused, UTF-8 not checked.
    fn skip_str(&mut self) -> Option<()> {
        loop {
            self.i = plain_run_end(self.b, self.i);
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => {
                    self.i += 1;
                    match self.peek()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                        b'u' => {
                            let hex = self.b.get(self.i + 1..self.i + 5)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            self.i += 5;
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
    }

    /// A number by its grammar alone, as serde_json skips one.
    fn skip_number(&mut self) -> Option<()> {
        let _ = self.eat(b'-');
        self.integer_digits()?;
        if self.eat(b'.').is_some() {
            self.digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            self.digits()?;
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// serde_json's reading, the reference.
    fn serde(body: &[u8]) -> Option<Top<'_>> {
        serde_json::from_slice(body).ok()
    }

    /// Whatever the scanner accepts, serde_json accepts and reads the same.
    fn agrees(body: &[u8]) -> Result<(), TestCaseError> {
        if let Some(scanned) = scan(body) {
            let reference = serde(body);
            prop_assert!(
                reference.is_some(),
                "scanned, refused by serde_json: {:?}",
                String::from_utf8_lossy(body)
            );
            prop_assert_eq!(
                Some(scanned),
                reference,
                "{:?}",
                String::from_utf8_lossy(body)
            );
        }
        Ok(())
    }

    const KEYS: &[&str] = &[
        "event_id",
        "type",
        "created",
        "livemode",
        "data",
        "id",
        "order_ref",
        "amount",
        "currency",
        "object",
        "status",
        "",
        "ev\\u0065nt_id",
        "d\\\"ata",
        "é",
        "\\ud800",
    ];

    fn space() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec!["", "", "", " ", "\n  ", "\t", "\r\n"])
    }

    /// A number: valid ones of every shape, and a few that are not.
    fn number(odd: bool) -> impl Strategy<Value = String> {
        let odd = prop::sample::select(if odd {
            vec![
                "01", "-01", "1.", ".5", "-", "1e", "1e+", "+1", "0x1", "1e400", "-1e400",
            ]
        } else {
            vec!["-0", "0", "1.5e308", "1e-400"]
        });
        prop_oneof![
            3 => "-?(0|[1-9][0-9]{0,20})(\\.[0-9]{1,4})?([eE][+-]?[0-9]{1,3})?",
            2 => prop::sample::select(vec![
                "9223372036854775807", "9223372036854775808", "-9223372036854775808",
                "-9223372036854775809", "18446744073709551615", "18446744073709551616",
                "999999999999999999", "1000000000000000000", "-999999999999999999",
                "1764449990", "49.00", "-5",
            ])
            .prop_map(str::to_string),
            1 => odd.prop_map(str::to_string),
        ]
    }

    /// A string: plain, escaped, non-ASCII; with `odd`, escapes and bytes JSON refuses too.
    fn string(odd: bool) -> impl Strategy<Value = String> {
        let mut pieces = vec![
            "a",
            "inv_7Hc3pQ",
            "evt_9Kq2xT4mLp",
            "invoice.paid",
            " ",
            "é",
            "✓",
            "😀",
            "\\n",
            "\\\"",
            "\\\\",
            "\\/",
            "\\u00e9",
            "\\ud83d\\ude00",
            "\\ud800",
            "\\udc00",
            "\u{7f}",
        ];
        if odd {
            pieces.extend(["\\u12", "\\x", "\u{1}", "\t"]);
        }
        prop::collection::vec(prop::sample::select(pieces), 0..5)
            .prop_map(|p| format!("\"{}\"", p.concat()))
    }

    /// Any JSON value; with `odd`, values that are not quite JSON among them.
    fn value(odd: bool) -> impl Strategy<Value = String> {
        let words = if odd {
            vec!["null", "true", "false", "nul", "tru", "nullx"]
        } else {
            vec!["null", "true", "false"]
        };
        let leaf = prop_oneof![
            prop::sample::select(words).prop_map(str::to_string),
            number(odd),
            string(odd),
        ];
        leaf.prop_recursive(5, 48, 6, |inner| {
            prop_oneof![
                (prop::collection::vec(inner.clone(), 0..4), space())
                    .prop_map(|(items, s)| format!("[{s}{}{s}]", items.join(","))),
                (members(KEYS, inner, 5), space()).prop_map(|(m, s)| format!("{{{s}{m}{s}}}")),
            ]
        })
    }

    fn members(
        keys: &'static [&'static str],
        value: impl Strategy<Value = String>,
        n: usize,
    ) -> impl Strategy<Value = String> {
        let member = (prop::sample::select(keys), space(), value, space())
            .prop_map(|(k, s, v, t)| format!("{s}\"{k}\"{t}:{s}{v}{t}"));
        prop::collection::vec(member, 0..n).prop_map(|m| m.join(","))
    }

    const DATA_KEYS: &[&str] = &["id", "order_ref", "amount", "currency", "object", "id"];

    /// An envelope-like body: the top level's names (and others, and repeats) over any values,
    /// or a `data` object of `data`'s names over any values.
    fn body() -> impl Strategy<Value = String> {
        let odd = any::<bool>();
        odd.prop_flat_map(|odd| {
            let data = (members(DATA_KEYS, value(odd), 7), space())
                .prop_map(|(m, s)| format!("{{{s}{m}{s}}}"));
            let with_data = (members(KEYS, value(odd), 5), data, string(odd), space()).prop_map(
                |(m, d, id, s)| {
                    let sep = if m.is_empty() { "" } else { "," };
                    format!("{{\"event_id\":{id},{s}\"data\":{s}{d}{sep}{m}}}")
                },
            );
            let any = (members(KEYS, value(odd), 7), space(), space())
                .prop_map(|(m, s, t)| format!("{s}{{{m}}}{t}"));
            prop_oneof![1 => any, 3 => with_data]
        })
    }

    proptest! {
        /// Eight bytes at a time finds the byte a byte at a time finds.
        #[test]
        fn a_plain_run_ends_where_its_first_end_byte_is(
            bytes in prop::collection::vec(prop_oneof![
                4 => 0x20u8..=0xff,
                1 => prop::sample::select(vec![b'"', b'\\', 0x00, 0x1f, 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc]),
            ], 0..80),
            from in 0usize..80,
        ) {
            let from = from.min(bytes.len());
            let naive = bytes[from..]
                .iter()
                .position(|b| matches!(b, b'"' | b'\\' | 0..=0x1f))
                .map_or(bytes.len(), |at| from + at);
            prop_assert_eq!(plain_run_end(&bytes, from), naive);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn the_scanner_reads_as_serde_json_or_leaves_it_to_it(body in body()) {
            agrees(body.as_bytes())?;
        }

        /// Bodies one byte away from a generated one: cut, changed, or with a byte inserted.
        #[test]
        fn one_byte_off(body in body(), at in any::<prop::sample::Index>(), byte in any::<u8>(), how in 0..3u8) {
            let mut b = body.into_bytes();
            let i = at.index(b.len() + 1);
            match how {
                0 => b.truncate(i),
                1 if i < b.len() => b[i] = byte,
                _ => b.insert(i, byte),
            }
            agrees(&b)?;
        }
    }

    #[test]
    fn a_provider_s_bodies_are_scanned_not_left_to_serde_json() {
        let bodies = [
            r#"{"event_id":"evt_9Kq2xT4mLp","type":"invoice.paid","created":1764449990,"livemode":false,"data":{"id":"inv_7Hc3pQ","object":"invoice","status":"paid","amount":"49.00","currency":"USDT","order_ref":"order_1042"}}"#,
            "{ \"event_id\": \"evt_1\", \"type\": \"deposit.confirmed\", \"created\": -5,\n \"livemode\": true,\n \"data\": {\"id\": \"dep_1\", \"amount\": 49.5, \"meta\": {\"note\": \"a \\\"quoted\\\" é\", \"tags\": [1, 2.5e3, null, {}]}}, \"extra\": [] }",
        ];
        for body in bodies {
            let scanned = scan(body.as_bytes());
            assert!(scanned.is_some(), "{body}");
            assert_eq!(scanned, serde(body.as_bytes()));
        }
    }

    #[test]
    fn what_the_scanner_leaves_to_serde_json() {
        for body in [
            r#"{"ev\u0065nt_id":"evt_1"}"#,       // an escape in a key it reads
            r#"{"event_id":"evt_\u0031"}"#,       // an escape in a value it reads
            r#"{"created":1e3}"#,                 // an exponent
            r#"{"created":-0}"#,                  // a float to serde_json
            r#"{"created":1234567890123456789}"#, // 19 digits
            "{\"created\":1}\u{feff}",            // a trailing byte (refused)
            "[1]",                                // not an object (refused)
        ] {
            assert_eq!(scan(body.as_bytes()), None, "{body}");
        }
    }
}
