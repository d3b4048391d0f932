//! "Did you mean": the one place that picks the closest known name to a misspelt one.
//!
//! Every layer (tool ids, parameters, node types, workflow arguments, manifest keys, config
//! settings) asks here, so a typo is judged the same way everywhere. Names are compared
//! case-, `_`- and `-`-insensitively, with the better of Jaro-Winkler (good for shared
//! prefixes) and normalised Damerau-Levenshtein (good for transpositions) from `strsim`.

/// The least similarity (0..=1) worth suggesting. Below it a suggestion is more noise than help.
pub const THRESHOLD: f64 = 0.8;

/// Lowercases and drops `_` and `-`, so `player_id`, `playerId` and `player-id` compare equal.
fn flat(s: &str) -> String {
    s.chars()
        .filter(|&c| c != '_' && c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// How alike `a` and `b` are, 0..=1 (2.0 when they are equal once flattened).
pub fn similarity(a: &str, b: &str) -> f64 {
    let (a, b) = (flat(a), flat(b));
    if a == b {
        return 2.0;
    }
    strsim::jaro_winkler(&a, &b).max(strsim::normalized_damerau_levenshtein(&a, &b))
}

/// The candidate closest to `wanted`, if one is close enough to be worth suggesting.
/// Ties go to the earliest candidate, so the answer is stable for a stable order.
pub fn closest<'a, I, S>(wanted: &str, candidates: I) -> Option<String>
where
    I: IntoIterator<Item = &'a S>,
    S: AsRef<str> + ?Sized + 'a,
{
    let mut best: Option<(f64, &str)> = None;
    for c in candidates {
        let c = c.as_ref();
        let score = similarity(wanted, c);
        if score >= THRESHOLD && best.is_none_or(|(b, _)| score > b) {
            best = Some((score, c));
        }
    }
    best.map(|(_, c)| c.to_string())
}

/// `", did you mean 'x'?"` for the closest candidate, or an empty string.
pub fn did_you_mean<'a, I, S>(wanted: &str, candidates: I) -> String
where
    I: IntoIterator<Item = &'a S>,
    S: AsRef<str> + ?Sized + 'a,
{
    closest(wanted, candidates)
        .map(|c| format!(", did you mean '{c}'?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_are_suggested_and_far_ones_are_not() {
        let known = ["parameters", "description", "implementation"];
        let cases = [
            ("params", Some("parameters")),
            ("paramters", Some("parameters")),
            ("descripton", Some("description")),
            ("Implementation", Some("implementation")),
            ("zzz", None),
            ("timeout", None),
        ];
        for (wanted, want) in cases {
            assert_eq!(closest(wanted, &known).as_deref(), want, "{wanted}");
        }
    }

    #[test]
    fn case_and_separators_do_not_count() {
        assert_eq!(
            closest("playerId", &["player_id", "sides"]).as_deref(),
            Some("player_id")
        );
        assert_eq!(did_you_mean("side", &["sides"]), ", did you mean 'sides'?");
        assert_eq!(did_you_mean("qqq", &["sides"]), "");
    }
}
