//! An agent's call format: the format its model writes calls in (`call_format` in a
//! profile, `[llm] call_format` in `tavern.toml`, or [`AgentRuntimeBuilder::call_format`]).
//! The manual teaches it and the loop reads it first, then every other format.
//!
//! What a manual teaches for a format is the `lesson` of the format's row in the
//! protocol's table (`protocol/formats/`, one file per format): how one call is written
//! and a paragraph saying how to call. Examples are built from the tools' own definitions
//! (the parameters' defaults, enums, examples or placeholders of their types), never
//! written per tool. Every format but `auto` is a call format.
//!
//! [`AgentRuntimeBuilder::call_format`]: super::AgentRuntimeBuilder::call_format

pub(crate) use crate::protocol::{python_literal, Arg};
use crate::protocol::{Format, Lesson, Naming, ACTION_LESSON, TAM_LESSON};

/// The format an agent's model writes calls in: a format of the protocol's table, taught
/// by its row's lesson.
#[derive(Debug, Clone, Copy)]
pub struct CallFormat {
    format: Format,
    lesson: &'static Lesson,
}

impl PartialEq for CallFormat {
    fn eq(&self, other: &Self) -> bool {
        self.format == other.format
    }
}

impl Eq for CallFormat {}

impl CallFormat {
    /// `<ACTION>` (seed 002 §4.2's manual).
    pub const ACTION: CallFormat = CallFormat {
        format: Format::Action,
        lesson: ACTION_LESSON,
    };

    /// TAM (seed 000 §6.2's manual).
    pub const TAM: CallFormat = CallFormat {
        format: Format::Tam,
        lesson: TAM_LESSON,
    };

    /// The protocol format it is read with.
    pub fn format(self) -> Format {
        self.format
    }

    /// Its name (`tam`, `action`, `hermes` …).
    pub fn name(self) -> &'static str {
        self.format.name()
    }

    /// Every call format, in the order of the protocol's table: each format of
    /// [`Format::NAMES`] that a manual can teach (all but `auto`).
    pub fn all() -> impl Iterator<Item = CallFormat> {
        Format::all().filter_map(Self::of)
    }

    /// The call format of a protocol format: every format but `auto` has one.
    pub fn of(format: Format) -> Option<CallFormat> {
        format.lesson().map(|lesson| CallFormat { format, lesson })
    }

    /// The names as a sentence: `tam, action, vcp or json`.
    pub fn names_text() -> String {
        let names: Vec<&str> = Self::all().map(Self::name).collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        }
    }

    pub(crate) fn lesson(self) -> &'static Lesson {
        self.lesson
    }

    /// One call of a tool named `id` (wire name `wire`) with `args`, in this format.
    pub(crate) fn example(self, id: &str, wire: &str, args: &[Arg<'_>]) -> String {
        let name = match self.lesson.naming {
            Naming::Id => id,
            Naming::Wire => wire,
        };
        (self.lesson.example)(name, args)
    }

    /// True when the format writes tools by their wire names.
    pub(crate) fn uses_wire_names(self) -> bool {
        self.lesson.naming == Naming::Wire
    }
}

impl std::fmt::Display for CallFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for CallFormat {
    type Err = String;

    /// A format name or alias (`xml` is `action`), in any case; `auto` and unknown names
    /// are refused with the closest name and the list.
    fn from_str(s: &str) -> Result<Self, String> {
        let wanted = s.trim();
        if let Some(cf) = wanted.parse::<Format>().ok().and_then(Self::of) {
            return Ok(cf);
        }
        let names: Vec<&str> = Self::all().map(Self::name).collect();
        let why = if wanted.eq_ignore_ascii_case("auto") {
            "'auto' is how output is read, not a format to teach; name the format the model writes"
                .to_string()
        } else {
            format!(
                "unknown call format '{wanted}'{}",
                crate::suggest::did_you_mean(wanted, &names)
            )
        };
        Err(format!("{why} (call formats: {})", Self::names_text()))
    }
}

impl serde::Serialize for CallFormat {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for CallFormat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_format_of_the_protocol_can_be_taught() {
        // Every row of the protocol's table has its lesson.
        for f in Format::all().filter(|f| *f != Format::Auto) {
            let cf = CallFormat::of(f).unwrap_or_else(|| panic!("format '{f}' has no lesson"));
            assert!(!cf.lesson().how.trim().is_empty(), "{f}: an empty lesson");
        }
        assert!(CallFormat::of(Format::Auto).is_none());
        let names: Vec<&str> = CallFormat::all().map(CallFormat::name).collect();
        assert_eq!(names, &Format::NAMES[1..]);
        assert_eq!(CallFormat::ACTION.name(), "action");
        assert_eq!(CallFormat::TAM.name(), "tam");
    }

    #[test]
    fn every_example_reads_back_as_its_call() {
        // What the manual teaches, the protocol reads: each format's example, read in
        // that format, is the one call it shows.
        let args: Vec<Arg<'_>> = vec![("ore", json!("iron")), ("note", json!("a b"))];
        for cf in CallFormat::all() {
            let text = cf.example("forge:smelt", "forge_smelt", &args);
            let p = crate::protocol::parse(&text, cf.format());
            assert_eq!(p.calls.len(), 1, "{cf}: {text}\n{p:?}");
            let want = if cf.uses_wire_names() {
                "forge_smelt"
            } else {
                "forge:smelt"
            };
            assert_eq!(p.calls[0].tool, want, "{cf}");
            assert_eq!(p.calls[0].args["ore"], "iron", "{cf}");
            assert_eq!(p.calls[0].args["note"], "a b", "{cf}");
            assert!(!p.has_errors(), "{cf}: {:?}", p.diagnostics);
        }
    }

    #[test]
    fn names_parse_with_a_did_you_mean() {
        assert_eq!("TAM".parse::<CallFormat>().unwrap().format(), Format::Tam);
        assert_eq!("xml".parse::<CallFormat>().unwrap().name(), "action");
        let e = "actoin".parse::<CallFormat>().unwrap_err();
        assert!(
            e.starts_with("unknown call format 'actoin', did you mean 'action'?"),
            "{e}"
        );
        assert!(e.contains(&CallFormat::names_text()), "{e}");
        let e = "auto".parse::<CallFormat>().unwrap_err();
        assert!(e.contains("not a format to teach"), "{e}");
        assert_eq!(
            serde_json::to_value("vcp".parse::<CallFormat>().unwrap()).unwrap(),
            "vcp"
        );
    }

    #[test]
    fn examples_are_written_from_the_arguments() {
        let args: Vec<Arg<'_>> = vec![("ore", json!("iron")), ("amount", json!(4))];
        let row = |n: &str| n.parse::<Format>().unwrap().lesson().unwrap();
        let ex = |n: &str| (row(n).example)("forge_smelt", &args);
        assert_eq!(ex("pythonic"), "[forge_smelt(ore='iron', amount=4)]");
        assert_eq!(
            ex("hermes"),
            "<tool_call>\n{\"name\": \"forge_smelt\", \"arguments\": {\"ore\": \"iron\", \"amount\": 4}}\n</tool_call>"
        );
        assert_eq!(
            ex("llama_json"),
            "{\"name\": \"forge_smelt\", \"parameters\": {\"ore\": \"iron\", \"amount\": 4}}"
        );
        assert_eq!(
            ex("functionary"),
            "<function=forge_smelt>{\"ore\": \"iron\", \"amount\": 4}</function>"
        );
        assert_eq!(ex("glm"), "forge_smelt\n{\"ore\": \"iron\", \"amount\": 4}");
        assert_eq!(
            python_literal(&json!({"a": [true, null, "it's"]})),
            "{'a': [True, None, 'it\\'s']}"
        );
    }
}
