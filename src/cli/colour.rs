//! Whether output may carry ANSI colour: only to a terminal, and never when `NO_COLOR` is set
//! to anything non-empty (<https://no-color.org>).

use std::io::IsTerminal;

/// True when stderr is a terminal and `NO_COLOR` is unset or empty.
pub fn stderr_colour() -> bool {
    allowed(
        std::env::var_os("NO_COLOR").as_deref(),
        std::io::stderr().is_terminal(),
    )
}

fn allowed(no_color: Option<&std::ffi::OsStr>, terminal: bool) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::allowed;
    use std::ffi::OsStr;

    #[test]
    fn colour_needs_a_terminal_and_no_no_color() {
        assert!(allowed(None, true));
        assert!(allowed(Some(OsStr::new("")), true));
        assert!(!allowed(Some(OsStr::new("1")), true));
        assert!(!allowed(None, false));
    }
}
